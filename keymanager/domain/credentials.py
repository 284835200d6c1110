"""Bearer tokens: generated with 256 random bits, stored only as SHA-256 hashes."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

from keymanager.domain.credential_kinds import BEARER_TOKEN, CERTIFICATE_SUBJECT

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


@dataclass(frozen=True)
class Credential:
    """What a request authenticates with: a bearer token (kept only as its hash) or the subject
    of a verified TLS client certificate. Exactly one of the two is set."""

    token_hash: str | None = None
    subject: str | None = None

    @classmethod
    def of_token(cls, token: str) -> Credential:
        return cls(token_hash=token_hash(token))

    @property
    def cache_name(self) -> str:
        """The name the principal is cached under: its kind's index prefix (``domain/credential_kinds.py``)
        and the token's hash or the subject."""
        if self.token_hash is not None:
            return f"{BEARER_TOKEN.index_prefix}{self.token_hash}"
        return f"{CERTIFICATE_SUBJECT.index_prefix}{self.subject}"
