"""An independent ``km:1`` decryptor, written from the format's description alone.

The description: README "Ciphertext" and the docstring of ``keymanager/domain/ciphertext.py``::

    km:1:<key_id>:<key_version>:<base64(body)>
    AES_256_CBC_HMAC_SHA256: body = IV (16) ‖ CBC-PAD ciphertext ‖ HMAC-SHA256 (32),
        the MAC over header ‖ IV ‖ ciphertext ‖ context ‖ uint64_be(len(context));
    AES_256_GCM: body = nonce (12) ‖ ciphertext ‖ tag (16), the AAD header ‖ context;
    header = ASCII "km:1:<key_id>:<key_version>:"; context = compact JSON, keys sorted, UTF-8
        (empty for none).

It uses ``cryptography`` and the standard library only — nothing from ``keymanager`` — with key
values known to the test, so that the vectors check the description as much as the service.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


class Refused(Exception):
    """The ciphertext is not valid under the given keys (any reason)."""


def context_bytes(context: dict[str, str] | None) -> bytes:
    if not context:
        return b""
    return json.dumps(context, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def split(text: str) -> tuple[str, int, bytes, bytes]:
    """(key id, key version, header, body) of a ciphertext string."""
    parts = text.split(":")
    if len(parts) != 5 or parts[0] != "km" or parts[1] != "1":
        raise Refused("not a km:1 ciphertext")
    key_id, version, encoded = parts[2], parts[3], parts[4]
    if len(key_id) != 32 or any(c not in "0123456789abcdef" for c in key_id):
        raise Refused("key id")
    if not version.isdigit() or version.startswith("0"):
        raise Refused("key version")
    header = f"km:1:{key_id}:{version}:".encode("ascii")
    return key_id, int(version), header, base64.b64decode(encoded, validate=True)


def decrypt(text: str, algorithm: str, aes_key: bytes, hmac_key: bytes | None, context: dict[str, str] | None) -> bytes:
    """The plaintext of ``text``; Refused when it does not authenticate."""
    _, _, header, body = split(text)
    encoded_context = context_bytes(context)
    if algorithm == "AES_256_GCM":
        if len(body) < 12 + 16:
            raise Refused("short body")
        try:
            return AESGCM(aes_key).decrypt(body[:12], body[12:], header + encoded_context)
        except InvalidTag:
            raise Refused("tag") from None
    if algorithm != "AES_256_CBC_HMAC_SHA256" or hmac_key is None:
        raise Refused("algorithm")
    iv, sealed, tag = body[:16], body[16:-32], body[-32:]
    if len(body) < 16 + 16 + 32 or len(sealed) % 16:
        raise Refused("body length")
    covered = header + iv + sealed + encoded_context + len(encoded_context).to_bytes(8, "big")
    if not hmac.compare_digest(hmac.new(hmac_key, covered, hashlib.sha256).digest(), tag):
        raise Refused("mac")
    decryptor = Cipher(algorithms.AES(aes_key), modes.CBC(iv)).decryptor()
    padded = decryptor.update(sealed) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise Refused("padding") from None
