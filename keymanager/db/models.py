"""ORM tables of the metadata store: principals and their credentials, keys and key versions, and the rest.

These rows are private to ``keymanager.db``; the store turns them into domain
records. The schema itself is created by the Alembic migrations beside this
module, which must be kept in step with these classes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    false,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware timestamp, always stored and read back in UTC.

    Naive datetimes are refused on write; naive values read back (SQLite keeps
    no offset) are UTC by construction.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; pass a timezone-aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]
        return value.astimezone(UTC)  # type: ignore[no-any-return]


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class PrincipalRow(Base):
    __tablename__ = "principals"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(128), unique=True, index=True)
    cert_subject: Mapped[str | None] = mapped_column(String(1024), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    xks_uri_prefix: Mapped[str | None] = mapped_column(String(128), unique=True)
    xks_region: Mapped[str | None] = mapped_column(String(32))
    create_keys: Mapped[bool] = mapped_column(Boolean, server_default=false())
    key_store: Mapped[bool] = mapped_column(Boolean, server_default=false())

    credentials: Mapped[list[CredentialRow]] = relationship(
        order_by="CredentialRow.kind", lazy="selectin", passive_deletes=True
    )
    """Its credentials looked up by name (``db/principal_credentials.py``; ``cert_subject``,
    ``xks_uri_prefix`` and ``xks_region`` above are their legacy copies, still written for older replicas)."""


class CredentialRow(Base):
    """A principal's credential of a kind stored by name (``domain/credential_kinds.py``
    ``Storage.CREDENTIALS``): the name a request presents (a certificate subject, an XKS URI
    prefix), unique per kind, and the facts stored beside it (an XKS prefix's ``region``)."""

    __tablename__ = "credentials"

    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(1024), primary_key=True)
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    facts: Mapped[dict[str, Any] | None] = mapped_column(JSON().with_variant(JSONB(), "postgresql"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class KeyRow(Base):
    __tablename__ = "keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    algorithm: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(32))
    description: Mapped[str] = mapped_column(Text)
    policy: Mapped[dict[str, Any]] = mapped_column(JSON().with_variant(JSONB(), "postgresql"))
    primary_version: Mapped[int] = mapped_column(Integer)
    min_decryption_version: Mapped[int] = mapped_column(Integer)
    rotation_period_days: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)
    deletion_date: Mapped[datetime | None] = mapped_column(UtcDateTime)
    token_format: Mapped[dict[str, Any] | None] = mapped_column(JSON().with_variant(JSONB(), "postgresql"))
    origin: Mapped[str] = mapped_column(String(16), server_default="hsm")
    lifecycle: Mapped[str | None] = mapped_column("kmip_lifecycle", String(32))
    exportable: Mapped[bool] = mapped_column(Boolean, server_default=false())
    attributes: Mapped[dict[str, Any] | None] = mapped_column(
        "kmip_attributes", JSON().with_variant(JSONB(), "postgresql")
    )
    usage: Mapped[str | None] = mapped_column(String(32))

    versions: Mapped[list[KeyVersionRow]] = relationship(order_by="KeyVersionRow.version", lazy="raise")


class KeyVersionRow(Base):
    __tablename__ = "key_versions"

    key_id: Mapped[str] = mapped_column(ForeignKey("keys.id"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    enc_label: Mapped[str | None] = mapped_column(String(128))
    mac_label: Mapped[str | None] = mapped_column(String(128))
    private_label: Mapped[str | None] = mapped_column(String(128))
    public_label: Mapped[str | None] = mapped_column(String(128))
    public_key: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    destroyed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class AuditRecordRow(Base):
    """One link of an audit hash chain (see :mod:`keymanager.domain.audit`)."""

    __tablename__ = "audit_records"

    chain_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    position: Mapped[int] = mapped_column(BigInteger, unique=True, index=True)
    """Its place in the whole log (listings follow it), given as it was stored; not hashed."""
    time: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    request_id: Mapped[str] = mapped_column(String(64))
    principal: Mapped[str | None] = mapped_column(String(128), index=True)
    action: Mapped[str] = mapped_column(String(64))
    key_id: Mapped[str | None] = mapped_column(String(32), index=True)
    key_version: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))
    status: Mapped[int] = mapped_column(Integer)
    client: Mapped[str | None] = mapped_column(String(64))
    details: Mapped[dict[str, Any]] = mapped_column(JSON().with_variant(JSONB(), "postgresql"))
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    seal: Mapped[str | None] = mapped_column(String(64))
    """HMAC-SHA256 (hex, in the HSM) of the last record of each append; NULL on the others."""


class AuditChainRow(Base):
    """One audit chain and its head: the last record's sequence number and hash.

    A ``writer`` chain is one audit writer process's, never reused; ``changes`` chains take the
    records written in the transactions of changes, each locked by one transaction at a time.
    """

    __tablename__ = "audit_chains"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    writer: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    last_hash: Mapped[str] = mapped_column(String(64))


class MetadataVersionRow(Base):
    """One row (id 1): incremented in the transaction of every change to a principal or a key."""

    __tablename__ = "metadata_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(BigInteger)


class HsmOrphanRow(Base):
    """A ``km/`` token object seen with no key version naming it (see :mod:`keymanager.db.orphans`)."""

    __tablename__ = "hsm_orphans"

    label: Mapped[str] = mapped_column(String(128), primary_key=True)
    first_seen_at: Mapped[datetime] = mapped_column(UtcDateTime)
    destroyed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class AccessKeyRow(Base):
    """An access key of the AWS KMS API: its secret sealed under the HSM key ``wrap_label``."""

    __tablename__ = "access_keys"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    sealed_secret: Mapped[bytes] = mapped_column(LargeBinary)
    wrap_label: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class KeyTagRow(Base):
    """A tag of a key (AWS KMS API's TagResource): a key and a value, unique per key."""

    __tablename__ = "key_tags"

    key_id: Mapped[str] = mapped_column(ForeignKey("keys.id", ondelete="CASCADE"), primary_key=True)
    tag_key: Mapped[str] = mapped_column(String(128), primary_key=True)
    tag_value: Mapped[str] = mapped_column(String(256))


class KeyAliasRow(Base):
    """A name a key answers to: its own ``keys.name`` (a row kept by ``Store`` beside every key) and
    each further alias the AWS KMS API gave it. The primary key makes every name, a key's own or
    an alias, unique across all keys."""

    __tablename__ = "key_aliases"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("keys.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ManagedObjectRow(Base):
    """A managed object registered through KMIP that is not a key: secret data, an opaque object, a
    certificate. Its value is stored sealed (AES-256-GCM in the HSM, ``doors/kmip/objects.py``)."""

    __tablename__ = "kmip_objects"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    object_type: Mapped[str] = mapped_column(String(32), index=True)
    state: Mapped[str] = mapped_column(String(32))
    owner_id: Mapped[str | None] = mapped_column(String(32), index=True)
    policy: Mapped[dict[str, Any]] = mapped_column(JSON().with_variant(JSONB(), "postgresql"))
    attributes: Mapped[dict[str, Any]] = mapped_column(JSON().with_variant(JSONB(), "postgresql"))
    sealed: Mapped[bytes | None] = mapped_column(LargeBinary)
    seal_label: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class TransitKeyRow(Base):
    """What the Vault Transit door keeps of a key beyond the key itself (``db/transit.py``): Vault's safety
    flag ``deletion_allowed`` and its ``min_encryption_version`` (0: the latest)."""

    __tablename__ = "transit_keys"

    key_id: Mapped[str] = mapped_column(ForeignKey("keys.id", ondelete="CASCADE"), primary_key=True)
    deletion_allowed: Mapped[bool] = mapped_column(Boolean, server_default=false())
    min_encryption_version: Mapped[int] = mapped_column(Integer, server_default="0")


class AppRoleCredentialRow(Base):
    """An AppRole credential of a principal (the Transit door's ``POST /v1/auth/approle/login``): its
    ``role_id`` and the SHA-256 of its ``secret_id`` (shown once, never stored)."""

    __tablename__ = "approle_credentials"

    role_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AppRoleTokenRow(Base):
    """A client token an AppRole login made (its SHA-256 only), valid until ``expires_at``."""

    __tablename__ = "approle_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    principal_id: Mapped[str] = mapped_column(ForeignKey("principals.id", ondelete="CASCADE"), index=True)
    role_id: Mapped[str] = mapped_column(ForeignKey("approle_credentials.role_id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)


class ApprovalRulesRow(Base):
    """The approval rules of the service (scope ``service``) or of one key (scope: its id), approvers by
    principal id (``db/approvals.py``)."""

    __tablename__ = "approval_rules"

    scope: Mapped[str] = mapped_column(String(32), primary_key=True)
    rules: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class ApprovalRequestRow(Base):
    """A guarded call awaiting (or past) its approvals: what will run (operations, target, arguments,
    bound by ``digest``), who asked, who may and did approve, and its state."""

    __tablename__ = "approval_requests"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    operations: Mapped[list[str]] = mapped_column(JSON)
    target: Mapped[str] = mapped_column(String(128))
    key_id: Mapped[str | None] = mapped_column(String(32))
    arguments: Mapped[dict[str, Any]] = mapped_column(JSON)
    digest: Mapped[str] = mapped_column(String(64), index=True)
    requester_id: Mapped[str] = mapped_column(String(32), index=True)
    requester: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16), index=True)
    approvals_required: Mapped[int] = mapped_column(Integer)
    approvers: Mapped[list[str] | None] = mapped_column(JSON)
    votes: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    vote_count: Mapped[int] = mapped_column(Integer)
    denial: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
    executed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
