"""On-board streaming: large blobs encrypted and decrypted by the HSM, segment by segment.

The format is :mod:`keymanager.domain.stream`. A :class:`StreamSealer` seals segments under
the key's primary version; a :class:`StreamOpener` opens the segments of one stream, each only
after its MAC or tag is verified. Both run the HSM work on the process's HSM thread, one
segment per call, so small requests keep being served between segments.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from keymanager.domain import ciphertext as ct
from keymanager.domain.models import HsmObjects, Key
from keymanager.domain.stream import StreamHeader
from keymanager.errors import DecryptionFailed, VersionBelowMinimum
from keymanager.hsm import Hsm


@dataclass(frozen=True)
class StreamSealer:
    hsm: Hsm
    objects: HsmObjects
    header: StreamHeader
    context: bytes

    @classmethod
    def for_key(cls, hsm: Hsm, key: Key, segment_size: int, context: Mapping[str, str] | None) -> StreamSealer:
        """A sealer for a new stream under ``key``'s primary version (the key's use already checked)."""
        version = key.versions[key.primary_version]
        header = StreamHeader(key.algorithm, segment_size, secrets.token_bytes(16), key.id, version.version)
        return cls(hsm, version.hsm, header, ct.canonical_context(context))

    async def seal(self, seq: int, plaintext: bytes, *, final: bool) -> bytes:
        """The sealed segment ``seq`` (at most ``segment_size`` bytes of plaintext)."""
        head = self.header.segment_head(seq, final)
        return await self.hsm.aencrypt(self.objects, self.header.algorithm, head, plaintext, self.context)


@dataclass(frozen=True)
class StreamOpener:
    hsm: Hsm
    objects: HsmObjects
    header: StreamHeader
    context: bytes

    @classmethod
    def for_key(cls, hsm: Hsm, key: Key, header: StreamHeader, context: Mapping[str, str] | None) -> StreamOpener:
        """An opener of a stream made with ``key`` (the key's use already checked).

        DecryptionFailed when the stream names another key, an unknown version or another
        algorithm; VersionBelowMinimum below the key's ``min_decryption_version``.
        """
        version = key.version(header.key_version)
        if header.key_id != key.id or header.algorithm is not key.algorithm or version is None:
            raise DecryptionFailed()
        if header.key_version < key.min_decryption_version:
            raise VersionBelowMinimum()
        return cls(hsm, version.hsm, header, ct.canonical_context(context))

    async def open(self, seq: int, sealed: bytes, *, final: bool) -> bytes:
        """The plaintext of segment ``seq``; DecryptionFailed unless it is authentic, in place and final as told."""
        head = self.header.segment_head(seq, final)
        return await self.hsm.adecrypt(self.objects, self.header.algorithm, head, sealed, self.context)
