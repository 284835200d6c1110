"""The Vault Transit door's translation: Transit API calls as calls of the services.

:class:`TransitService` holds the operations by name: the key changes of :class:`~.keys.TransitKeys`
(each recording itself in its own transaction: blocking, called off the event loop); the reads and the
uses of key material of :class:`~.crypto.TransitCrypto` and :class:`~.signing.TransitSigning` (MACs and
signatures), each run on a request's snapshot, its record committed by ``run_validated``; and the AppRole
credential kind (:class:`~.identity.AppRoles`). Vault's words: :mod:`.codec`; the HTTP side:
``doors/transit/door.py``; the guide: ``docs/transit.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from keymanager.db.transit import TransitStore
from keymanager.domain.audit import AuditEntry
from keymanager.domain.models import Principal
from keymanager.doors.transit.crypto import TransitCrypto, message_of
from keymanager.doors.transit.identity import AppRoles
from keymanager.doors.transit.keys import TransitCall, TransitKeys
from keymanager.doors.transit.signing import TransitSigning
from keymanager.services.core import CoreServices
from keymanager.services.snapshot import Snapshot

Change = Callable[[TransitCall, AuditEntry], Any]
Use = Callable[[Snapshot, TransitCall], Awaitable[dict[str, Any]]]

__all__ = ["AppRoles", "TransitCall", "TransitService", "message_of"]


class TransitService:
    """Every Transit operation of the door, by the name its action carries (``transit.<name>``)."""

    def __init__(
        self,
        *,
        core: CoreServices,
        store: TransitStore,
        principal: Callable[[str], Principal | None],
        max_batch_items: int,
        token_ttl_seconds: int,
    ) -> None:
        """The operations on ``core``'s keys, with what the door stores of its own (a key's Transit settings,
        AppRole credentials and client tokens) in ``store``; ``principal``: the principal of a name (an
        AppRole logs in as one); a batch holds at most ``max_batch_items``; a client token lives
        ``token_ttl_seconds``."""
        hsm = core.hsm
        self.keys = TransitKeys(core.keys, core.lifecycle, store, hsm)
        self.crypto = TransitCrypto(core.crypto, core.asymmetric, store, hsm, max_batch=max_batch_items)
        self.signing = TransitSigning(core.crypto, core.asymmetric, store, hsm, max_batch=max_batch_items)
        self.approles = AppRoles(store, principal, ttl_seconds=token_ttl_seconds)
        self.changes: dict[str, Change] = {
            "key_create": self.keys.create,
            "key_config": self.keys.config,
            "key_rotate": self.keys.rotate,
            "key_delete": self.keys.delete,
            "key_trim": self.keys.trim,
        }
        """Operations that change a key: blocking, each committing ``record`` with its change."""
        self.uses: dict[str, Use] = {
            "key_read": self.keys.read,
            "key_list": self.keys.names,
            "export": self.keys.export,
            "encrypt": self.crypto.encrypt,
            "decrypt": self.crypto.decrypt,
            "rewrap": self.crypto.rewrap,
            "datakey": self.crypto.datakey,
            "hmac": self.signing.hmac,
            "sign": self.signing.sign,
            "verify": self.signing.verify,
            "random": self.crypto.random,
            "hash": self.crypto.hash,
        }
        """Operations run on a request's snapshot (their success record committed by ``run_validated``)."""
