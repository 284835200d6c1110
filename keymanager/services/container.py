"""Wiring: one store, one HSM adapter and the services built on them, per process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from keymanager.config import Settings
from keymanager.db import Inventory, Store, make_engine, migrate
from keymanager.db.approvals import ApprovalStore
from keymanager.db.audit import AuditRecords
from keymanager.db.credentials import CredentialReader
from keymanager.db.kmip import KmipStore
from keymanager.db.kms import KmsStore
from keymanager.db.orphans import OrphanStore
from keymanager.db.transit import TransitStore
from keymanager.domain.models import Algorithm
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.hsm.capabilities import sealing_algorithm
from keymanager.services.access_keys import AccessKeyService
from keymanager.services.approvals import ApprovalService
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.audit import AuditReader, AuditWriter
from keymanager.services.audit_chain import AuditChain
from keymanager.services.audit_log import AuditLog
from keymanager.services.credential_index import CredentialIndex
from keymanager.services.crypto import CryptoService
from keymanager.services.key_import import KeyImportService
from keymanager.services.keys import KeyService
from keymanager.services.kmip import KmipService
from keymanager.services.kms.crypto import KmsCrypto
from keymanager.services.kms.keys import KmsKeys
from keymanager.services.lifecycle import LifecycleService
from keymanager.services.overview import Overview
from keymanager.services.principals import PrincipalService
from keymanager.services.public_hosts import public_hosts
from keymanager.services.readiness import Readiness
from keymanager.services.snapshot import MetadataCache
from keymanager.services.spool import SpoolArea, remove_dead
from keymanager.services.tokens import TokenService
from keymanager.services.transit import TransitService
from keymanager.services.xks import XksHealth, XksService


class ServiceObserver(Protocol):
    """What the services report as they work (the API's metrics implement it)."""

    def observe_hsm(self, operation: str, seconds: float, failed: bool) -> None: ...
    def observe_hsm_timeout(self, operation: str) -> None: ...
    def observe_audit_queue(self, depth: int) -> None: ...
    def observe_audit_failure(self) -> None: ...
    def observe_cache(self, table: str, entries: int, evicted: int) -> None: ...


@dataclass
class Services:
    """Everything a request needs; built once per worker process, after fork."""

    settings: Settings
    store: Store
    hsm: Hsm
    principals: PrincipalService
    approvals: ApprovalService
    keys: KeyService
    crypto: CryptoService
    asymmetric: AsymmetricService
    lifecycle: LifecycleService
    tokens: TokenService
    key_import: KeyImportService
    audit_records: AuditRecords
    audit_writer: AuditWriter
    audit_log: AuditLog
    audit_reader: AuditReader
    audit_chain: AuditChain
    cache: MetadataCache
    readiness: Readiness
    spool: SpoolArea
    inventory: Inventory
    access_keys: AccessKeyService
    kms_crypto: KmsCrypto
    kms_keys: KmsKeys
    credentials: CredentialIndex
    xks: XksService
    xks_health: XksHealth
    kmip: KmipService
    overview: Overview
    transit: TransitService
    owns_hsm: bool = True

    @classmethod
    def build(cls, settings: Settings, *, hsm: Hsm | None = None, run_migrations: bool = True) -> Services:
        """Open the database (migrating it to the current schema) and the HSM token (or use ``hsm``)."""
        if settings.is_softhsm:
            settings.export_softhsm_conf()
        engine = make_engine(
            settings.resolved_database_url(), prepared_statements=settings.database_prepared_statements
        )
        if run_migrations:
            migrate(engine)
        owns_hsm = hsm is None
        hsm = hsm or Hsm(
            settings.pkcs11_module, settings.pkcs11_token_label, settings.pin(), timeout=settings.hsm_timeout_seconds
        )
        audit_key = AuditKey(hsm, settings.audit_key_label)
        store = Store(engine, audit_key=audit_key)
        audit_records = AuditRecords(engine, audit_key)
        approvals = ApprovalService(ApprovalStore(engine, audit_key=audit_key), store)
        keys = KeyService(store, hsm, approvals=approvals)
        lanes = settings.audit_writer_lanes if engine.dialect.name == "postgresql" else 1
        audit_writer = AuditWriter(audit_records, lanes=lanes)
        crypto = CryptoService(
            hsm, max_plaintext_bytes=settings.max_plaintext_bytes, max_batch_items=settings.max_batch_items
        )
        lifecycle = LifecycleService(
            store,
            hsm,
            min_pending_days=settings.min_pending_days,
            orphans=OrphanStore(engine, audit_key=audit_key),
            orphan_grace_seconds=settings.orphan_grace_seconds,
            approvals=approvals,
        )
        kms_store = KmsStore(engine, audit_key=audit_key)
        asymmetric = AsymmetricService(hsm, crypto)
        transit_store = TransitStore(engine, audit_key=audit_key)
        cache = MetadataCache(
            store,
            max_principals=settings.cache_max_principals,
            max_keys=settings.cache_max_keys,
            client_tokens=transit_store.principal_by_client_token,
        )
        audit_log = AuditLog(audit_writer)
        readiness = Readiness(
            hsm,
            store,
            audit_writer,
            probe_interval=settings.ready_probe_interval_seconds,
            timeout=settings.hsm_timeout_seconds,
        )
        audit_chain = AuditChain(
            audit_records,
            audit_key,
            checkpoint_file=settings.audit_checkpoint_file,
            checkpoints_always_logged=settings.env == "production",
        )
        inventory = Inventory(engine)
        return cls(
            settings=settings,
            store=store,
            hsm=hsm,
            principals=PrincipalService(store, approvals=approvals),
            approvals=approvals,
            keys=keys,
            crypto=crypto,
            asymmetric=asymmetric,
            lifecycle=lifecycle,
            tokens=TokenService(hsm, max_batch_items=settings.max_batch_items),
            key_import=KeyImportService(store, hsm),
            audit_records=audit_records,
            audit_writer=audit_writer,
            audit_log=audit_log,
            audit_reader=AuditReader(audit_records, lambda ref: keys.find(ref).id),
            cache=cache,
            audit_chain=audit_chain,
            readiness=readiness,
            spool=SpoolArea(settings.spool_dir, quota=settings.max_spool_bytes),
            inventory=inventory,
            access_keys=AccessKeyService(kms_store, hsm, store.principal_by_name, public_hosts(settings)),
            kms_crypto=KmsCrypto(crypto, hsm, asymmetric),
            kms_keys=KmsKeys(keys, lifecycle, kms_store, symmetric_default=_symmetric_default(settings, hsm)),
            credentials=CredentialIndex(CredentialReader(engine), limit=settings.credential_index_max),
            xks=XksService(crypto),
            xks_health=XksHealth(hsm, readiness),
            kmip=KmipService(
                keys=keys,
                lifecycle=lifecycle,
                crypto=crypto,
                asymmetric=asymmetric,
                store=KmipStore(engine, audit_key=audit_key),
                hsm=hsm,
                cache=cache,
                audit_log=audit_log,
                max_plaintext_bytes=settings.max_plaintext_bytes,
            ),
            overview=Overview(
                settings=settings,
                store=store,
                keys=keys,
                inventory=inventory,
                hsm=hsm,
                readiness=readiness,
                audit_chain=audit_chain,
            ),
            transit=TransitService(
                keys=keys,
                lifecycle=lifecycle,
                crypto=crypto,
                asymmetric=asymmetric,
                store=transit_store,
                hsm=hsm,
                principal=store.principal_by_name,
                max_batch_items=settings.max_batch_items,
                token_ttl_seconds=settings.transit_token_ttl_seconds,
            ),
            owns_hsm=owns_hsm,
        )

    def observe(self, observer: ServiceObserver) -> None:
        """Report to ``observer`` from now on: every HSM call and timeout, the audit queue's depth and
        every audit record that could not be written, the metadata cache's sizes and evictions."""
        self.hsm.observer = observer.observe_hsm
        self.hsm.on_timeout = observer.observe_hsm_timeout
        self.audit_writer.observer = observer.observe_audit_queue
        self.audit_writer.on_failure = observer.observe_audit_failure
        self.cache.observer = observer.observe_cache

    def maintain(self) -> None:
        """One round of scheduled work: rotate keys that are due, destroy keys whose date has come,
        destroy orphaned HSM objects (when their sweep is due) and spool areas of dead processes, and
        forget the Transit door's expired client tokens, expire approval requests whose time has passed."""
        self.lifecycle.rotate_due()
        self.approvals.expire_due()
        self.lifecycle.sweep()
        self.transit.approles.sweep()
        if self.settings.orphan_sweep:
            self.lifecycle.sweep_orphans_when_due()
        remove_dead(self.settings.spool_dir)

    def close(self) -> None:
        """Flush the audit log, remove this process's spool area, close the HSM session (when this
        object opened it) and the database pool."""
        self.spool.close()
        self.audit_writer.close()
        self.audit_records.close()
        if self.owns_hsm:
            self.hsm.close()
        self.store.close()


def _symmetric_default(settings: Settings, hsm: Hsm) -> Callable[[], Algorithm]:
    """What the KMS door's ``SYMMETRIC_DEFAULT`` is: ``KM_KMS_DEFAULT_ALGORITHM``, or the best scheme the
    token supports (asked when a key is made, from the capabilities its session read)."""
    if settings.kms_default_algorithm is not None:
        configured = Algorithm(settings.kms_default_algorithm)
        return lambda: configured
    return lambda: sealing_algorithm(hsm.capabilities())
