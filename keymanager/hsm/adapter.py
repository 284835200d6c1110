"""The PKCS#11 adapter: the service's one interface to the HSM.

:class:`Hsm` is a thin facade: each method names one operation of :mod:`keymanager.hsm.operations`
and runs it on the process's HSM thread within the adapter's deadline
(:class:`~keymanager.hsm.dispatch.Dispatcher`). The package is split by concern:

* :mod:`~keymanager.hsm.dispatch`: the HSM thread, deadlines, and PKCS#11 errors mapped to the service's;
* :mod:`~keymanager.hsm.token`: the library, the logged-in session and the cached key copies;
* :mod:`~keymanager.hsm.quirks`: SoftHSM's departures from the standard, applied to SoftHSM only;
* :mod:`~keymanager.hsm.capabilities`: what the token can do, and what each feature needs of it;
* :mod:`~keymanager.hsm.templates`: the labels and templates of the service's token objects;
* :mod:`~keymanager.hsm.readback`: every object made is read back against its template;
* :mod:`~keymanager.hsm.operations`: what each operation does on the HSM thread;
* :mod:`~keymanager.hsm.key_pairs`: the same for asymmetric key versions (generation, signing,
  OAEP decryption, ECDH);
* :mod:`~keymanager.hsm.mechanism_probes`: mechanism parameters tried once at start.

Errors every method may raise: HsmRefused (400: the token refused a mechanism, its parameters or a
template), TemplateNotHonoured (503: the token made an object other than asked; it is destroyed),
HsmUnavailable (the HSM failed or did not answer in time; the
next call reopens the session), KeyMaterialMissing (a key version's object is not in the token:
the same 503 on every operation, see :mod:`keymanager.hsm.operations`). Decryption raises
DecryptionFailed for every failure of the ciphertext itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from keymanager.domain.key_specs import EncryptionAlgorithm, KeyUsage, SigningAlgorithm
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.errors import DecryptionFailed
from keymanager.hsm import attributes, export
from keymanager.hsm import key_pairs as kp
from keymanager.hsm import operations as op
from keymanager.hsm.capabilities import Capabilities
from keymanager.hsm.dispatch import Dispatcher
from keymanager.hsm.lane import KeyPairLane
from keymanager.hsm.operations import IvSource
from keymanager.hsm.templates import AES_TEMPLATE, HMAC_TEMPLATE, version_labels
from keymanager.hsm.token import MissingKeyObject

__all__ = ["AES_TEMPLATE", "HMAC_TEMPLATE", "Hsm", "IvSource", "MissingKeyObject", "version_labels"]
"""The names this module had before the package was split stay importable from it."""


class Hsm(Dispatcher):
    """Cryptographic operations on keys that live in one PKCS#11 token.

    Construct with the module path, the token label and the user PIN (``timeout`` keyword: the
    deadline of each call). Methods are thread-safe; the ``a``-prefixed ones are awaited from the
    event loop. :meth:`call` / :meth:`acall` run any function of the token state on the HSM thread.
    """

    def __init__(self, module: str, token_label: str, pin: str, *, timeout: float = 5.0) -> None:
        super().__init__(module, token_label, pin, timeout=timeout)
        self._lane = KeyPairLane.of(module, token_label, pin)

    def ping(self) -> None:
        """Raise HsmUnavailable unless the token answers."""
        self.call(op.ping)

    def probe(self) -> None:
        """Raise HsmUnavailable unless the token answers and takes a write: a token object is made and
        destroyed (label ``km-ready-probe``, outside the ``km/`` namespace of key versions)."""
        self.call(op.probe)

    def capabilities(self) -> Capabilities:
        """What the token can do (read from it when the first session opened; see
        :mod:`keymanager.hsm.capabilities`)."""
        return self.call(op.capabilities)

    def known_capabilities(self) -> Capabilities | None:
        """:meth:`capabilities` if they were read already, without calling the HSM (None if not)."""
        return self._token.known_capabilities

    def require(self, feature: str) -> None:
        """InvalidRequest naming the missing mechanism unless the token supports ``feature`` (a key of
        :data:`~keymanager.hsm.capabilities.FEATURES`, e.g. an algorithm's name)."""
        self.call(op.require, feature)

    async def arequire(self, feature: str) -> None:
        """:meth:`require` awaited from the event loop (a public-key operation the HSM must be able to undo)."""
        await self.acall(op.require, feature)

    def generate_version(self, key_id: str, version: int, algorithm: Algorithm) -> HsmObjects:
        """Generate the token objects of one key version; all or nothing."""
        return self.call(op.generate_version, key_id, version, algorithm)

    def generate_exportable(self, key_id: str, version: int, algorithm: Algorithm) -> HsmObjects:
        """Generate an exportable key version of an AES-GCM spec (``hsm/export.py``: extractable, sensitive)."""
        return self.call(export.generate, key_id, version, algorithm)

    def import_aes(self, key_id: str, version: int, material: bytes, exportable: bool = False) -> HsmObjects:
        """A key version of AES ``material`` (16, 24 or 32 bytes), unwrapped into the HSM, non-extractable
        (``exportable``: extractable-but-sensitive, as :meth:`generate_exportable` makes)."""
        return self.call(export.import_aes, key_id, version, material, exportable)

    async def aexport(self, objects: HsmObjects) -> bytes:
        """The material of an exportable key version, wrapped in the HSM and unwrapped in memory."""
        assert objects.enc_label is not None
        return await self.acall(export.export, objects.enc_label)

    def generate_key_pair(
        self, key_id: str, version: int, algorithm: Algorithm, usage: KeyUsage
    ) -> tuple[HsmObjects, bytes]:
        """Generate the private and public key objects of one asymmetric key version (all or nothing),
        returning their labels and the DER SubjectPublicKeyInfo; UnsupportedByHsm naming what is missing.

        In the key-pair lane's process (:mod:`~keymanager.hsm.lane`: RSA-4096 generation takes
        seconds, and this process's HSM thread serves everyone's encryption), within its deadline;
        RateLimited when the lane is full."""
        return self._lane.generate(key_id, version, algorithm, usage)

    async def asign(self, objects: HsmObjects, algorithm: Algorithm, signing: SigningAlgorithm, signed: bytes) -> bytes:
        """The ``signing`` signature of ``signed`` (a digest; the message for pure Ed25519) with the
        version's private key, in the HSM (ECDSA: DER-encoded)."""
        return await self.acall(kp.sign, objects, algorithm, signing, signed)

    async def averify(
        self, objects: HsmObjects, algorithm: Algorithm, signing: SigningAlgorithm, signed: bytes, signature: bytes
    ) -> bool:
        """Whether ``signature`` is valid for ``signed``, checked in the HSM with the version's public key
        (for ``key_specs.VERIFIED_IN_HSM``: every other algorithm is verified with ``cryptography``)."""
        return await self.acall(kp.verify, objects, algorithm, signing, signed, signature)

    async def adecrypt_oaep(
        self, objects: HsmObjects, algorithm: Algorithm, encryption: EncryptionAlgorithm, ciphertext: bytes
    ) -> bytes:
        """The plaintext of a raw RSAES-OAEP ciphertext, decrypted in the HSM; DecryptionFailed for any
        failure of the ciphertext."""
        return await self.acall(kp.decrypt_oaep, objects, algorithm, encryption, ciphertext)

    async def aderive(self, objects: HsmObjects, algorithm: Algorithm, peer_point: bytes) -> bytes:
        """The ECDH shared secret of the version's private key and the uncompressed ``peer_point``."""
        return await self.acall(kp.derive, objects, algorithm, peer_point)

    def destroy_version(self, objects: HsmObjects) -> None:
        """Destroy the token objects of one key version (absent ones are ignored)."""
        self.call(op.destroy_version, objects)

    def destroy_label(self, label: str) -> None:
        """Destroy the token's key objects labelled ``label`` (none is fine; idempotent)."""
        self.call(op.destroy_label, label)

    def find_labels(self, prefix: str) -> list[str]:
        """Labels of the token's key objects (secret, private, public) that start with ``prefix`` (for
        checks and sweeps)."""
        return self.call(op.find_labels, prefix)

    def find_labels_afresh(self, prefix: str) -> list[str]:
        """:meth:`find_labels`, also seeing objects other processes made or destroyed since this one
        last wrote (SoftHSM keeps a view per process: its library is re-initialised first)."""
        return self.call(op.find_labels_afresh, prefix)

    async def aversion_objects(self, objects: HsmObjects) -> list[dict[str, Any]]:
        """What the token says of the objects of a key version (:func:`attributes.version_objects`)."""
        return await self.acall(attributes.version_objects, objects)

    async def aidentity(self) -> tuple[str, str, str]:
        """The token's manufacturer, model and serial number."""
        return await self.acall(op.identity)

    def random(self, nbytes: int) -> bytes:
        """``nbytes`` random bytes from the HSM's generator."""
        return self.call(op.random, nbytes)

    def encrypt(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, plaintext: bytes, context: bytes
    ) -> bytes:
        """:meth:`aencrypt` for a caller off the event loop (sealing an access key's secret)."""
        return self.call(op.encrypt, objects, algorithm, head, plaintext, context)

    async def aencrypt(
        self,
        objects: HsmObjects,
        algorithm: Algorithm,
        head: bytes,
        plaintext: bytes,
        context: bytes,
        *,
        iv_source: IvSource = secrets.token_bytes,
    ) -> bytes:
        """The ciphertext body of ``plaintext`` (see :mod:`keymanager.domain.ciphertext`); its IV or
        nonce comes from ``iv_source`` (fixed bytes only in known-answer tests)."""
        return await self.acall(op.encrypt, objects, algorithm, head, plaintext, context, iv_source)

    async def aencrypt_many(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, items: Sequence[tuple[bytes, bytes]]
    ) -> list[bytes]:
        """:meth:`aencrypt` of each ``(plaintext, context)``, in one trip to the HSM thread."""
        return await self.acall(op.encrypt_many, objects, algorithm, head, items)

    async def adecrypt(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, body: bytes, context: bytes
    ) -> bytes:
        """The plaintext of a ciphertext body; any failure of the ciphertext raises DecryptionFailed."""
        return await self.acall(op.decrypt, objects, algorithm, head, body, context)

    async def adecrypt_many(
        self, algorithm: Algorithm, items: Sequence[tuple[HsmObjects, bytes, bytes, bytes]]
    ) -> list[bytes | DecryptionFailed]:
        """:meth:`adecrypt` of each ``(objects, head, body, context)``; a failed item gives DecryptionFailed.

        A missing key object fails the whole batch with KeyMaterialMissing, as it fails every operation."""
        return await self.acall(op.decrypt_many, algorithm, items)

    async def adata_key(
        self, objects: HsmObjects, algorithm: Algorithm, head: bytes, nbytes: int, context: bytes
    ) -> tuple[bytes, bytes]:
        """``nbytes`` from the HSM's generator and their ciphertext body under ``objects``, in one trip."""
        return await self.acall(op.data_key, objects, algorithm, head, nbytes, context)

    async def amac(self, objects: HsmObjects, message: bytes, algorithm: Algorithm = Algorithm.HMAC_SHA256) -> bytes:
        """The HMAC (``algorithm``: one of ``HMAC_KEY_BITS``) of ``message`` with the version's HMAC key
        (computed in the HSM)."""
        return await self.acall(op.mac, objects, message, algorithm)
