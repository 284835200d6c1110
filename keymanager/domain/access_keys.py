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
XKS_ACCESS_KEY_ID = re.compile(r"[A-Z2-7]{20,30}")
"""AWS's rule for an external key store's ``AccessKeyId`` (generated ids already follow it)."""
XKS_SECRET_ACCESS_KEY = re.compile(r"[A-Za-z0-9/+=]{43,64}")
"""AWS's rule for an external key store's ``RawSecretAccessKey``."""
MAX_PER_PRINCIPAL = 10
"""Access keys one principal may hold at once (AWS allows 2 per user; rotation needs 2)."""


def new_access_key_id() -> str:
    """``KMAK`` + 16 base32 characters (80 random bits)."""
    return ID_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()


def new_secret_access_key(*, xks: bool = False) -> str:
    """40 characters of base64url: 240 random bits; for a key store (``xks``), 44 characters of
    standard base64, 256 random bits (AWS KMS accepts only that alphabet, 43-64 characters)."""
    if xks:
        return base64.b64encode(secrets.token_bytes(32)).decode()
    return secrets.token_urlsafe(30)


def form_error(access_key_id: str, secret: str, *, xks: bool = False) -> str | None:
    """What is wrong with a given pair (None: nothing); a key store's pair follows AWS's rules."""
    id_rule, secret_rule = (XKS_ACCESS_KEY_ID, XKS_SECRET_ACCESS_KEY) if xks else (ACCESS_KEY_ID, SECRET_ACCESS_KEY)
    if not id_rule.fullmatch(access_key_id):
        return (
            "a key store's access_key_id is 20-30 characters of A-Z and 2-7"
            if xks
            else "access_key_id is 16-128 characters of A-Z and 0-9"
        )
    if not secret_rule.fullmatch(secret):
        return (
            "a key store's secret_access_key is 43-64 characters of A-Z, a-z, 0-9, '/', '+' and '='"
            if xks
            else "secret_access_key is 40-128 printable ASCII characters without spaces"
        )
    return None


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
