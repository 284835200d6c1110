"""Wiring: one store, one HSM adapter and the services built on them, per process."""

from __future__ import annotations

from dataclasses import dataclass

from keymanager.config import Settings
from keymanager.db import Store, make_engine, migrate
from keymanager.db.audit import AuditStore
from keymanager.db.kms import KmsStore
from keymanager.hsm import Hsm
from keymanager.services.access_keys import AccessKeyService
from keymanager.services.audit import AuditLog
from keymanager.services.crypto import CryptoService
from keymanager.services.keys import KeyService
from keymanager.services.kms import KmsCrypto
from keymanager.services.kms_keys import KmsKeys
from keymanager.services.lifecycle import LifecycleService
from keymanager.services.principals import PrincipalService
from keymanager.services.snapshot import MetadataCache


@dataclass
class Services:
    """Everything a request needs; built once per worker process, after fork."""

    settings: Settings
    store: Store
    hsm: Hsm
    principals: PrincipalService
    keys: KeyService
    crypto: CryptoService
    lifecycle: LifecycleService
    audit_store: AuditStore
    audit: AuditLog
    cache: MetadataCache
    access_keys: AccessKeyService
    kms_crypto: KmsCrypto
    kms_keys: KmsKeys
    owns_hsm: bool = True

    @classmethod
    def build(cls, settings: Settings, *, hsm: Hsm | None = None, run_migrations: bool = True) -> Services:
        """Open the database (migrating it to the current schema) and the HSM token (or use ``hsm``)."""
        if settings.is_softhsm:
            settings.export_softhsm_conf()
        engine = make_engine(settings.resolved_database_url())
        if run_migrations:
            migrate(engine)
        store = Store(engine)
        audit_store = AuditStore(engine)
        owns_hsm = hsm is None
        hsm = hsm or Hsm(settings.pkcs11_module, settings.pkcs11_token_label, settings.pin())
        keys = KeyService(store, hsm)
        crypto = CryptoService(
            keys, hsm, max_plaintext_bytes=settings.max_plaintext_bytes, max_batch_items=settings.max_batch_items
        )
        lifecycle = LifecycleService(store, hsm, min_pending_days=settings.min_pending_days)
        kms_store = KmsStore(engine)
        return cls(
            settings=settings,
            store=store,
            hsm=hsm,
            principals=PrincipalService(store),
            keys=keys,
            crypto=crypto,
            lifecycle=lifecycle,
            audit_store=audit_store,
            audit=AuditLog(audit_store),
            cache=MetadataCache(store),
            access_keys=AccessKeyService(kms_store, hsm),
            kms_crypto=KmsCrypto(crypto, hsm),
            kms_keys=KmsKeys(keys, lifecycle, kms_store),
            owns_hsm=owns_hsm,
        )

    def maintain(self) -> None:
        """One round of scheduled work: rotate keys that are due, destroy keys whose date has come."""
        self.lifecycle.rotate_due()
        self.lifecycle.sweep()

    def close(self) -> None:
        """Flush the audit log, close the HSM session (when this object opened it) and the database pool."""
        self.audit.close()
        self.audit_store.close()
        if self.owns_hsm:
            self.hsm.close()
        self.store.close()
