"""Access keys for the AWS KMS API: AWS-style key pairs a principal signs requests with (SigV4).

An access key id is 16-128 characters of ``[A-Z0-9]`` (AWS's own are 20, e.g. ``AKIA…``);
generated ids are ``KMAK`` followed by 16 random base32 characters (80 bits: an id is a name,
not a secret). A secret access key is 40-128 printable ASCII characters without whitespace;
generated secrets are 40 characters of base64url (240 random bits). The service needs the
secret itself to verify a signature, so it stores it sealed under an HSM key (see
``services/access_keys.py``) and never in clear; the secret is shown once, when created.
"""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from keymanager.domain.models import Principal

ID_PREFIX = "KMAK"
ACCESS_KEY_ID = re.compile(r"[A-Z0-9]{16,128}")
SECRET_ACCESS_KEY = re.compile(r"[\x21-\x7e]{40,128}")
MAX_PER_PRINCIPAL = 10
"""Access keys one principal may hold at once (AWS allows 2 per user; rotation needs 2)."""


def new_access_key_id() -> str:
    """``KMAK`` + 16 base32 characters (80 random bits)."""
    return ID_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()


def new_secret_access_key() -> str:
    """40 characters of base64url: 240 random bits."""
    return secrets.token_urlsafe(30)


def sealing_header(access_key_id: str) -> bytes:
    """What the sealed secret is bound to (authenticated, not encrypted): its access key id."""
    return f"km:access-key:{access_key_id}:".encode("ascii")


@dataclass(frozen=True)
class AccessKey:
    """A stored access key: whose it is, and its secret sealed under the HSM key ``wrap_label``."""

    id: str
    principal: Principal
    sealed_secret: bytes
    wrap_label: str
    created_at: datetime
