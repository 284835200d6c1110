"""The ``CiphertextBlob`` of the AWS KMS API: a binary spelling of a ``km:1`` ciphertext.

Layout (all integers big-endian)::

    offset  size  field
    0       2     magic  b"km"
    2       1     format version (1)
    3       1     algorithm (1 = AES_256_CBC_HMAC_SHA256, 2 = AES_256_GCM, 3 = AES_128_GCM, 4 = AES_192_GCM)
    4       16    key id (the 32 hex digits of the key's id, as bytes)
    20      4     key version (uint32, >= 1)
    24      ...   body, exactly as in ``km:1``: IV/nonce ‖ ciphertext ‖ MAC/tag

The body is authenticated exactly as the ``km:1`` string's (see :mod:`keymanager.domain.ciphertext`):
the MAC or the GCM AAD covers the text header ``km:1:<key_id>:<key_version>:`` and the encryption
context. So a blob and the ``km:1`` string of the same fields are the same ciphertext, decrypted
by the same code: moving a blob to another key or version, or changing its context, fails
authentication. The algorithm byte is not authenticated; it must equal the key's algorithm,
which alone decides how the body is opened.

Decoding never says why bytes are not a blob: every problem raises ``DecryptionFailed``.
"""

from __future__ import annotations

import struct

from keymanager.domain.ciphertext import Ciphertext
from keymanager.domain.key_specs import FORMAT_IDS
from keymanager.domain.models import Algorithm
from keymanager.errors import DecryptionFailed

MAGIC = b"km"
FORMAT_VERSION = 1
MAX_BLOB_BYTES = 6144
"""AWS KMS's largest ``CiphertextBlob``."""

ALGORITHM_IDS = FORMAT_IDS
"""The algorithm id each encrypting spec has in this format (the table of key types' ``format_id``)."""
_ALGORITHMS = {number: algorithm for algorithm, number in ALGORITHM_IDS.items()}
_HEADER = struct.Struct(">2sBB16sI")


def encode(ciphertext: Ciphertext, algorithm: Algorithm) -> bytes:
    """The blob of ``ciphertext`` under a key of ``algorithm`` (an encrypting algorithm)."""
    head = _HEADER.pack(
        MAGIC, FORMAT_VERSION, ALGORITHM_IDS[algorithm], bytes.fromhex(ciphertext.key_id), ciphertext.key_version
    )
    return head + ciphertext.body


def decode(blob: bytes) -> tuple[Ciphertext, Algorithm]:
    """The ciphertext and algorithm a blob names; ``DecryptionFailed`` for anything else."""
    if not isinstance(blob, bytes) or not _HEADER.size < len(blob) <= MAX_BLOB_BYTES:
        raise DecryptionFailed()
    magic, version, algorithm, key_id, key_version = _HEADER.unpack_from(blob)
    if magic != MAGIC or version != FORMAT_VERSION or algorithm not in _ALGORITHMS or key_version < 1:
        raise DecryptionFailed()
    return Ciphertext(key_id=key_id.hex(), key_version=key_version, body=blob[_HEADER.size :]), _ALGORITHMS[algorithm]
