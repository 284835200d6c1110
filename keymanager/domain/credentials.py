"""Bearer tokens: generated with 256 random bits, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets
import uuid

TOKEN_PREFIX = "kmt_"  # noqa: S105 (a prefix, not a secret)


def new_token() -> str:
    """A new bearer token: ``kmt_`` followed by 256 random bits, base64url."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """The stored form of a token (hex SHA-256); tokens are high-entropy, so no salt is needed."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_id() -> str:
    """A new object id: 32 lowercase hex characters."""
    return uuid.uuid4().hex
