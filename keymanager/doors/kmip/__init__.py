"""The KMIP door's translation: KMIP operations as calls of the services (``docs/kmip.md``).

:class:`KmipService` holds one handler per operation served (:attr:`KmipService.operations`),
each a call of the shared services through the modules here: :mod:`.keys` (Create, Activate,
Revoke, Destroy, Get of keys), :mod:`.crypto` (Encrypt, Decrypt), :mod:`.discovery` (Query,
DiscoverVersions), :mod:`.objects` (objects that are not keys), :mod:`.pairs` (key pairs),
:mod:`.catalog` (Locate and the attributes). They read and answer the door's own types
(:mod:`.requests`, named by :mod:`.spec`); messages are read within the bounds of :mod:`.ttlv`
and decoded into those types and encoded back by the codec (:mod:`.codec`, the one module that
imports PyKMIP); attributes are kept as :mod:`.attributes` says. The wire
(TLS, framing, deadlines) is ``serving/kmip.py``'s; the caller, the batch and the audit records
are the door's (``doors/kmip/door.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from keymanager.db.managed_objects import ManagedObjectStore
from keymanager.domain.managed_objects import ManagedObject
from keymanager.doors.kmip import spec
from keymanager.doors.kmip.calls import Batch, KmipCall
from keymanager.doors.kmip.catalog import KmipCatalog
from keymanager.doors.kmip.crypto import KmipCrypto
from keymanager.doors.kmip.discovery import KmipDiscovery
from keymanager.doors.kmip.keys import KmipKeys
from keymanager.doors.kmip.objects import TYPES, KmipObjects
from keymanager.doors.kmip.pairs import KmipPairs, is_pair, split
from keymanager.doors.kmip.requests import Identified, RegisterRequest
from keymanager.errors import KeyManagerError
from keymanager.services.audit_log import AuditLog
from keymanager.services.core import CoreServices
from keymanager.services.managed_objects import ManagedObjectService
from keymanager.services.raw_cipher import RawCipher
from keymanager.services.snapshot import MetadataCache

Handler = Callable[[KmipCall, Any], Awaitable[Any]]
ObjectHandler = Callable[[KmipCall, ManagedObject, Any], Awaitable[Any]]
PublicHandler = Callable[[KmipCall, Any, str, str], Awaitable[Any]]
Op = spec.Operation

__all__ = ["Batch", "Handler", "KmipCall", "KmipService"]


class KmipService:
    """The operations of the KMIP door, by the door's ``Operation``."""

    def __init__(
        self,
        *,
        core: CoreServices,
        store: ManagedObjectStore,
        objects: ManagedObjectService,
        cache: MetadataCache,
        audit_log: AuditLog,
        max_plaintext_bytes: int,
    ) -> None:
        """The operations on ``core``'s keys and on the objects that are not keys (kept sealed in ``store``,
        listed, read and destroyed by the rules of ``objects``);
        the uses of keys (cipher, MAC, signature) run on snapshots of ``cache``, their records committed
        through ``audit_log``; Encrypt and Decrypt take at most ``max_plaintext_bytes``."""
        hsm = core.hsm
        self.keys = KmipKeys(core.keys, core.lifecycle, cache, hsm)
        self.objects = KmipObjects(store, hsm, objects)
        self.catalog = KmipCatalog(core.keys, self.keys, self.objects)
        raw = RawCipher(hsm, max_plaintext_bytes=max_plaintext_bytes)
        self.crypto = KmipCrypto(raw, core.crypto, cache, audit_log)
        self.pairs = KmipPairs(core.keys, self.keys, core.asymmetric, cache, audit_log)
        self.operations: dict[spec.Operation, Handler] = {
            Op.CREATE: self.keys.create,
            Op.CREATE_KEY_PAIR: self.pairs.create_key_pair,
            Op.REGISTER: self._register,
            Op.ACTIVATE: self._either(self.keys.activate, self.objects.activate, self.pairs.activate_public),
            Op.REVOKE: self._either(self.keys.revoke, self.objects.revoke, self.pairs.revoke_public),
            Op.DESTROY: self._either(self.keys.destroy, self.objects.destroy, self.pairs.destroy_public),
            Op.GET: self._either(self.keys.get, self.objects.get, self.pairs.get_any),
            Op.ENCRYPT: self._cipher(self.crypto.encrypt, self.pairs.encrypt),
            Op.DECRYPT: self._cipher(self.crypto.decrypt, self.pairs.decrypt),
            Op.MAC: self.crypto.mac,
            Op.MAC_VERIFY: self.crypto.mac_verify,
            Op.SIGN: self.pairs.sign,
            Op.SIGNATURE_VERIFY: self.pairs.signature_verify,
            Op.LOCATE: self.catalog.locate,
            Op.GET_ATTRIBUTES: self.catalog.get_attributes,
            Op.GET_ATTRIBUTE_LIST: self.catalog.get_attribute_list,
            Op.ADD_ATTRIBUTE: self.catalog.add_attribute,
            Op.MODIFY_ATTRIBUTE: self.catalog.modify_attribute,
            Op.SET_ATTRIBUTE: self.catalog.set_attribute,
            Op.DELETE_ATTRIBUTE: self.catalog.delete_attribute,
        }
        self._cache = cache
        object_types = (
            spec.ObjectType.SYMMETRIC_KEY,
            spec.ObjectType.PUBLIC_KEY,
            spec.ObjectType.PRIVATE_KEY,
            *TYPES,
        )
        self.discovery = KmipDiscovery(self.operations, object_types)
        self.operations[Op.DISCOVER_VERSIONS] = self.discovery.discover_versions
        self.operations[Op.QUERY] = self.discovery.query

    async def _register(self, call: KmipCall, payload: RegisterRequest) -> Identified:
        """Register: a symmetric key into the HSM (``keys.py``), any other object sealed (``objects.py``)."""
        if payload.object_type == spec.ObjectType.SYMMETRIC_KEY:
            return await self.keys.register(call, payload)
        return await self.objects.register(call, payload)

    def _either(self, on_key: Handler, on_object: ObjectHandler, on_public: PublicHandler) -> Handler:
        """A handler of an operation on one object: ``on_object`` for a registered object (found by
        its unique identifier), ``on_public`` for a key pair's public key, ``on_key`` for anything
        else (a key, or an unknown identifier)."""

        async def handle(call: KmipCall, payload: Any) -> Any:
            uid = call.uid(payload.unique_identifier)
            ref, public = split(uid)
            if public:
                return await on_public(call, payload, ref, uid)
            found = await self.objects.find(uid)
            if found is not None and self.objects.visible(found, call.principal):
                return await on_object(call, found, payload)
            return await on_key(call, payload)

        return handle

    def _cipher(self, symmetric: Handler, pair: Handler) -> Handler:
        """Encrypt or Decrypt: with a key pair (RSA-OAEP) or a symmetric key (AES)."""

        async def handle(call: KmipCall, payload: Any) -> Any:
            ref, public = split(call.uid(payload.unique_identifier))
            if public:
                return await pair(call, payload)
            try:
                key = await self._cache.snapshot(fresh=False).key(ref)
            except KeyManagerError:
                return await symmetric(call, payload)
            return await (pair if is_pair(key) else symmetric)(call, payload)

        return handle

    @property
    def served(self) -> frozenset[spec.Operation]:
        """The operations decoded and served (every other one is answered Operation Not Supported)."""
        return frozenset(self.operations)
