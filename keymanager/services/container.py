"""Wiring: one store, one HSM adapter and the services built on them, per process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from keymanager.config import Settings
from keymanager.db import Engine, Inventory, Store, make_engine, migrate
from keymanager.db.approvals import ApprovalStore
from keymanager.db.audit import AuditRecords
from keymanager.db.credentials import CredentialReader
from keymanager.db.kms import KmsStore
from keymanager.db.managed_objects import ManagedObjectStore
from keymanager.db.orphans import OrphanStore
from keymanager.db.transit import TransitStore
from keymanager.domain.models import Algorithm
from keymanager.doors.kmip import KmipService
from keymanager.doors.kms.crypto import KmsCrypto
from keymanager.doors.kms.keys import KmsKeys
from keymanager.doors.transit import TransitService
from keymanager.doors.xks import XksHealth, XksService
from keymanager.hsm import Hsm
from keymanager.hsm.audit_key import AuditKey
from keymanager.hsm.capabilities import sealing_algorithm
from keymanager.services.access_keys import AccessKeyService
from keymanager.services.approvals import ApprovalService
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.audit import AuditReader, AuditWriter
from keymanager.services.audit_chain import AuditChain
from keymanager.services.audit_log import AuditLog
from keymanager.services.core import CoreServices
from keymanager.services.credential_index import CredentialIndex
from keymanager.services.crypto import CryptoService
from keymanager.services.key_import import KeyImportService
from keymanager.services.keys import KeyService
from keymanager.services.lifecycle import LifecycleService
from keymanager.services.managed_objects import ManagedObjectService
from keymanager.services.overview import Overview
from keymanager.services.principals import PrincipalService
from keymanager.services.public_hosts import public_hosts
from keymanager.services.readiness import Readiness
from keymanager.services.snapshot import MetadataCache
from keymanager.services.spool import SpoolArea, remove_dead
from keymanager.services.tokens import TokenService


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
    objects: ManagedObjectService
    overview: Overview
    transit: TransitService
    owns_hsm: bool = True

    @classmethod
    def build(cls, settings: Settings, *, hsm: Hsm | None = None, run_migrations: bool = True) -> Services:
        """Open the database (migrating it to the current schema) and the HSM token (or use ``hsm``)."""
        if settings.is_softhsm:
            settings.export_softhsm_conf()
        engine = _open_database(settings, run_migrations=run_migrations)
        owns_hsm = hsm is None
        hsm = hsm or _open_hsm(settings)
        stores = _Stores.open(engine, AuditKey(hsm, settings.audit_key_label))
        shared = _Shared.build(settings, stores, hsm)
        core, store = shared.core, stores.store
        objects = ManagedObjectService(stores.objects, store.principal_names)
        return cls(
            settings=settings,
            store=store,
            hsm=hsm,
            principals=PrincipalService(store, approvals=shared.approvals),
            approvals=shared.approvals,
            keys=core.keys,
            crypto=core.crypto,
            asymmetric=core.asymmetric,
            lifecycle=core.lifecycle,
            tokens=TokenService(hsm, max_batch_items=settings.max_batch_items),
            key_import=KeyImportService(store, hsm),
            audit_records=stores.audit_records,
            audit_writer=shared.audit_writer,
            audit_log=shared.audit_log,
            audit_reader=AuditReader(stores.audit_records, lambda ref: core.keys.find(ref).id),
            cache=shared.cache,
            audit_chain=shared.audit_chain,
            readiness=shared.readiness,
            spool=SpoolArea(settings.spool_dir, quota=settings.max_spool_bytes),
            inventory=stores.inventory,
            access_keys=AccessKeyService(stores.kms, hsm, store.principal_by_name, public_hosts(settings)),
            kms_crypto=KmsCrypto(core.crypto, hsm, core.asymmetric),
            kms_keys=KmsKeys(
                core.keys, core.lifecycle, stores.kms, symmetric_default=_symmetric_default(settings, hsm)
            ),
            credentials=CredentialIndex(stores.credentials, limit=settings.credential_index_max),
            xks=XksService(core.crypto),
            xks_health=XksHealth(hsm, shared.readiness),
            kmip=_kmip_service(shared, stores, objects),
            objects=objects,
            overview=_overview(shared, stores),
            transit=_transit_service(shared, stores),
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


def _open_database(settings: Settings, *, run_migrations: bool) -> Engine:
    """The engine of ``KM_DATABASE_URL`` (a SQLite file under ``KM_VAR_DIR`` without it), its schema
    first migrated to the current one with ``run_migrations``; raises what migrating raises."""
    engine = make_engine(settings.resolved_database_url(), prepared_statements=settings.database_prepared_statements)
    if run_migrations:
        migrate(engine)
    return engine


def _open_hsm(settings: Settings) -> Hsm:
    """A session on the configured PKCS#11 token (module, label, PIN, call deadline)."""
    return Hsm(
        settings.pkcs11_module, settings.pkcs11_token_label, settings.pin(), timeout=settings.hsm_timeout_seconds
    )


@dataclass(frozen=True, slots=True)
class _Stores:
    """The database side: one object per store, all on one engine; those that write audit records
    with their changes seal them with ``audit_key``."""

    engine: Engine
    audit_key: AuditKey
    store: Store
    audit_records: AuditRecords
    approvals: ApprovalStore
    orphans: OrphanStore
    kms: KmsStore
    transit: TransitStore
    objects: ManagedObjectStore
    credentials: CredentialReader
    inventory: Inventory

    @classmethod
    def open(cls, engine: Engine, audit_key: AuditKey) -> _Stores:
        """The stores on ``engine`` (no connection is made until one is used)."""
        return cls(
            engine=engine,
            audit_key=audit_key,
            store=Store(engine, audit_key=audit_key),
            audit_records=AuditRecords(engine, audit_key),
            approvals=ApprovalStore(engine, audit_key=audit_key),
            orphans=OrphanStore(engine, audit_key=audit_key),
            kms=KmsStore(engine, audit_key=audit_key),
            transit=TransitStore(engine, audit_key=audit_key),
            objects=ManagedObjectStore(engine, audit_key=audit_key),
            credentials=CredentialReader(engine),
            inventory=Inventory(engine),
        )


@dataclass(frozen=True, slots=True)
class _Shared:
    """What the services of every door are built on: the approvals, the core services, the audit
    log (its writer, the chain's checkpoints), the metadata cache and the readiness probes."""

    settings: Settings
    approvals: ApprovalService
    core: CoreServices
    audit_writer: AuditWriter
    audit_log: AuditLog
    cache: MetadataCache
    readiness: Readiness
    audit_chain: AuditChain

    @classmethod
    def build(cls, settings: Settings, stores: _Stores, hsm: Hsm) -> _Shared:
        """The shared services on ``stores`` and ``hsm``, as ``settings`` bound them (the audit writer
        with ``KM_AUDIT_WRITER_LANES`` lanes on PostgreSQL, one on SQLite). Nothing is read or written yet."""
        approvals = ApprovalService(stores.approvals, stores.store)
        keys = KeyService(stores.store, hsm, approvals=approvals)
        lanes = settings.audit_writer_lanes if stores.engine.dialect.name == "postgresql" else 1
        audit_writer = AuditWriter(stores.audit_records, lanes=lanes)
        crypto = CryptoService(
            hsm, max_plaintext_bytes=settings.max_plaintext_bytes, max_batch_items=settings.max_batch_items
        )
        lifecycle = LifecycleService(
            stores.store,
            hsm,
            min_pending_days=settings.min_pending_days,
            orphans=stores.orphans,
            orphan_grace_seconds=settings.orphan_grace_seconds,
            approvals=approvals,
        )
        return cls(
            settings=settings,
            approvals=approvals,
            core=CoreServices(keys, lifecycle, crypto, AsymmetricService(hsm, crypto), hsm),
            audit_writer=audit_writer,
            audit_log=AuditLog(audit_writer),
            cache=MetadataCache(
                stores.store,
                max_principals=settings.cache_max_principals,
                max_keys=settings.cache_max_keys,
                client_tokens=stores.transit.principal_by_client_token,
            ),
            readiness=Readiness(
                hsm,
                stores.store,
                audit_writer,
                probe_interval=settings.ready_probe_interval_seconds,
                timeout=settings.hsm_timeout_seconds,
            ),
            audit_chain=AuditChain(
                stores.audit_records,
                stores.audit_key,
                checkpoint_file=settings.audit_checkpoint_file,
                checkpoints_always_logged=settings.env == "production",
            ),
        )


def _kmip_service(shared: _Shared, stores: _Stores, objects: ManagedObjectService) -> KmipService:
    """The KMIP door's operations (``doors/kmip/``) on the shared services, the KMIP store and the
    native service of the objects that are not keys."""
    return KmipService(
        core=shared.core,
        store=stores.objects,
        objects=objects,
        cache=shared.cache,
        audit_log=shared.audit_log,
        max_plaintext_bytes=shared.settings.max_plaintext_bytes,
    )


def _transit_service(shared: _Shared, stores: _Stores) -> TransitService:
    """The Vault Transit door's operations (``doors/transit/``) on the shared services and the Transit store."""
    return TransitService(
        core=shared.core,
        store=stores.transit,
        principal=stores.store.principal_by_name,
        max_batch_items=shared.settings.max_batch_items,
        token_ttl_seconds=shared.settings.transit_token_ttl_seconds,
    )


def _overview(shared: _Shared, stores: _Stores) -> Overview:
    """The console's overview of the service: its settings, keys, inventory, HSM and audit chain."""
    return Overview(
        settings=shared.settings,
        store=stores.store,
        keys=shared.core.keys,
        inventory=stores.inventory,
        hsm=shared.core.hsm,
        readiness=shared.readiness,
        audit_chain=shared.audit_chain,
    )
