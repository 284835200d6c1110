"""The KMIP door's translation: KMIP operations as calls of the services (``docs/kmip.md``).

:class:`KmipService` holds one handler per operation served (:attr:`KmipService.operations`),
each a call of the shared services through the modules here: :mod:`.keys` (Create, Activate,
Revoke, Destroy, Get of keys), :mod:`.crypto` (Encrypt, Decrypt), :mod:`.discovery` (Query,
DiscoverVersions). Messages are read within the bounds of :mod:`.ttlv` and decoded and encoded by
PyKMIP's codec in :mod:`.messages`; attributes are kept as :mod:`.attributes` says. The wire
(TLS, framing, deadlines) is ``serving/kmip.py``'s; the caller, the batch and the audit records
are the door's (``api/kmip.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kmip.core import enums

from keymanager.hsm import Hsm
from keymanager.services.audit_log import AuditLog
from keymanager.services.keys import KeyService
from keymanager.services.kmip.calls import Batch, KmipCall
from keymanager.services.kmip.crypto import KmipCrypto
from keymanager.services.kmip.discovery import KmipDiscovery
from keymanager.services.kmip.keys import KmipKeys
from keymanager.services.lifecycle import LifecycleService
from keymanager.services.snapshot import MetadataCache

Handler = Callable[[KmipCall, Any], Awaitable[Any]]
Op = enums.Operation

__all__ = ["Batch", "Handler", "KmipCall", "KmipService"]


class KmipService:
    """The operations of the KMIP door, by PyKMIP's ``Operation``."""

    def __init__(
        self,
        *,
        keys: KeyService,
        lifecycle: LifecycleService,
        hsm: Hsm,
        cache: MetadataCache,
        audit_log: AuditLog,
        max_plaintext_bytes: int,
    ) -> None:
        self.keys = KmipKeys(keys, lifecycle, cache)
        self.crypto = KmipCrypto(hsm, cache, audit_log, max_plaintext_bytes=max_plaintext_bytes)
        self.operations: dict[enums.Operation, Handler] = {
            Op.CREATE: self.keys.create,
            Op.ACTIVATE: self.keys.activate,
            Op.REVOKE: self.keys.revoke,
            Op.DESTROY: self.keys.destroy,
            Op.GET: self.keys.get,
            Op.ENCRYPT: self.crypto.encrypt,
            Op.DECRYPT: self.crypto.decrypt,
        }
        self.discovery = KmipDiscovery(self.operations, (enums.ObjectType.SYMMETRIC_KEY,))
        self.operations[Op.DISCOVER_VERSIONS] = self.discovery.discover_versions
        self.operations[Op.QUERY] = self.discovery.query

    @property
    def served(self) -> frozenset[enums.Operation]:
        """The operations decoded and served (every other one is answered Operation Not Supported)."""
        return frozenset(self.operations)
