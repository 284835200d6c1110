"""The ciphertext string and the bytes that are authenticated with it.

Format (printable, self-describing, like Vault's ``vault:v1:``)::

    km:1:<key_id>:<key_version>:<base64(body)>

``1`` is the format version, ``key_id`` 32 lowercase hex characters, ``key_version``
a positive decimal integer. The body is

* ``AES_256_CBC_HMAC_SHA256``: IV (16) ‖ CBC-PAD ciphertext (multiple of 16) ‖ HMAC-SHA256 (32);
  the MAC covers ``header ‖ IV ‖ ciphertext ‖ context ‖ uint64_be(len(context))``;
* ``AES_256_GCM`` (and ``AES_128_GCM``, ``AES_192_GCM``): nonce (12) ‖ ciphertext ‖ tag (16); the AAD
  is ``header ‖ context``.

``header`` is the ASCII text ``km:1:<key_id>:<key_version>:``, so a ciphertext moved to
another key or version fails authentication. ``context`` is the canonical encoding
of the encryption context (see :func:`canonical_context`).

Parsing never says *why* a string is not a ciphertext: every problem raises
:class:`~keymanager.errors.DecryptionFailed`.
"""

from __future__ import annotations

import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from keymanager.errors import DecryptionFailed, InvalidRequest

MAX_CONTEXT_BYTES = 8192
"""The longest encryption context, as :func:`canonical_context` encodes it (AWS KMS's limit is 8,192 bytes)."""

PREFIX = "km"
FORMAT_VERSION = 1
IV_BYTES = 16
MAC_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16

_HEADER = re.compile(r"km:1:([0-9a-f]{32}):([1-9][0-9]{0,8}):")


@dataclass(frozen=True, slots=True)
class Ciphertext:
    key_id: str
    key_version: int
    body: bytes

    @property
    def header(self) -> bytes:
        return header(self.key_id, self.key_version)

    def encode(self) -> str:
        return encode(self.key_id, self.key_version, self.body)


def encode(key_id: str, key_version: int, body: bytes) -> str:
    """The ciphertext string of ``body`` under ``key_id`` version ``key_version``."""
    return f"{PREFIX}:{FORMAT_VERSION}:{key_id}:{key_version}:" + binascii.b2a_base64(body, newline=False).decode()


def header(key_id: str, key_version: int) -> bytes:
    """The authenticated header of a ciphertext under ``key_id`` version ``key_version``."""
    return f"{PREFIX}:{FORMAT_VERSION}:{key_id}:{key_version}:".encode("ascii")


def parse(text: str) -> Ciphertext:
    """Parse a ciphertext string; any deviation from the format raises ``DecryptionFailed``."""
    match = _HEADER.match(text) if isinstance(text, str) else None
    if match is None:
        raise DecryptionFailed()
    encoded = text[match.end() :]
    # Canonical standard base64 only, so one body has one spelling: whole quanta, the alphabet,
    # padding only at the end (strict mode) and no unused bits set in the last quantum.
    if len(encoded) % 4:
        raise DecryptionFailed()
    try:
        body = binascii.a2b_base64(encoded, strict_mode=True)
    except ValueError:  # binascii.Error, or text that is not ASCII
        raise DecryptionFailed() from None
    tail = len(body) % 3
    if tail and binascii.b2a_base64(body[-tail:], newline=False) != encoded[-4:].encode():
        raise DecryptionFailed()
    return Ciphertext(key_id=match.group(1), key_version=int(match.group(2)), body=body)


def canonical_context(context: Mapping[str, str] | None) -> bytes:
    """Canonical bytes of an encryption context: compact JSON, keys sorted, UTF-8; empty for none.

    Every operation that takes a context (on every door) reads it through here, so this is the
    one place of its bound: InvalidRequest naming :data:`MAX_CONTEXT_BYTES` for a longer one, and
    for text UTF-8 cannot carry (lone surrogates, which JSON's ``\\ud800`` escapes let in)."""
    if not context:
        return b""
    text = json.dumps(dict(context), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        encoded = text.encode()
    except UnicodeEncodeError:
        raise InvalidRequest("the encryption context is not valid Unicode text") from None
    if len(encoded) > MAX_CONTEXT_BYTES:
        raise InvalidRequest(f"the encryption context is limited to {MAX_CONTEXT_BYTES} bytes (as canonical JSON)")
    return encoded


def mac_input(head: bytes, iv: bytes, ciphertext: bytes, context: bytes) -> bytes:
    """The bytes HMAC-SHA256 covers for ``AES_256_CBC_HMAC_SHA256``."""
    return b"".join(mac_parts(head, iv, ciphertext, context))


def mac_parts(head: bytes, iv: bytes, ciphertext: bytes, context: bytes) -> tuple[bytes, ...]:
    """:func:`mac_input` in its parts, in order (for a MAC computed in several parts, without the copy)."""
    return head, iv, ciphertext, context, len(context).to_bytes(8, "big")


def gcm_aad(head: bytes, context: bytes) -> bytes:
    """The additional authenticated data for ``AES_256_GCM``."""
    return head + context
