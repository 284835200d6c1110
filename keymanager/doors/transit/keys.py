"""Transit's key management (``keys/…``, ``export/…``) as calls of the key services.

A Transit key is one of our keys: its type is its spec's ``transit_type`` (the table of key types), its
versions, state, policy and deletion window are the core's (``KeyService``, ``LifecycleService``), and
what Vault keeps beyond them (``deletion_allowed``, ``min_encryption_version``) is ``db/transit.py``'s.
A key made here names its creator in its policy for every right its spec and usage allow (``key_use``);
others are granted through the REST API. Keys of a spec Transit has no type for are not shown here.

Refused, each by name: ``derived`` and ``convergent_encryption`` (per-context keys would be derived
outside the HSM's one key per version), ``allow_plaintext_backup`` (backups are key material in
plaintext), ``exportable`` after creation (a key made non-extractable in the HSM stays so), ``trim``
(single versions are not destroyed: ``min_decryption_version`` retires them), a rotation period that is
not whole days, and types without a row (``chacha20-poly1305``, …).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives import serialization

from keymanager.db.transit import TransitSettings, TransitStore
from keymanager.domain import public_keys
from keymanager.domain.audit import AuditEntry, Outcome
from keymanager.domain.key_specs import SPECS, KeySpec, KeyUsage, spec_of
from keymanager.domain.models import Key, KeyState, Lifecycle, Principal
from keymanager.domain.policy import Operation, Policy
from keymanager.doors.transit import codec
from keymanager.doors.transit.codec import Route, invalid
from keymanager.errors import Conflict
from keymanager.hsm import Hsm
from keymanager.services.key_creation import InitialFacts, NewKey
from keymanager.services.key_use import rights_for, usable
from keymanager.services.keys import KeyService, visible
from keymanager.services.lifecycle import LifecycleService
from keymanager.services.snapshot import Snapshot

VAULT_TYPES_WITHOUT_ROW = frozenset(
    {"chacha20-poly1305", "xchacha20-poly1305", "aes128-cmac", "aes192-cmac", "aes256-cmac", "managed_key"}
)
"""Vault's types this service has no key spec for (refused by name; every other unknown type is unknown)."""
_CREATE_FIELDS = frozenset(
    {"type", "derived", "convergent_encryption", "exportable", "allow_plaintext_backup", "auto_rotate_period"}
    | {"key_size", "context", "name"}
)
_CONFIG_FIELDS = frozenset(
    {"min_decryption_version", "min_encryption_version", "deletion_allowed", "exportable"}
    | {"allow_plaintext_backup", "auto_rotate_period", "name"}
)
DAY = 86400


@dataclass
class TransitCall:
    """One Transit request of an authenticated principal: what it names, and what its audit record says."""

    principal: Principal
    route: Route
    params: Mapping[str, Any]
    key_id: str | None = None
    key_version: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    """The answer's status (a batch with failed items: 400, or the caller's partial failure code)."""
    warnings: list[str] = field(default_factory=list)
    recorded: bool = True
    """Whether a change committed the record it was given (False: nothing changed, the door writes it)."""

    @property
    def name(self) -> str:
        assert self.route.name is not None
        return self.route.name

    def used(self, key: Key, version: int | None = None) -> Key:
        self.key_id, self.key_version = key.id, version if version is not None else self.key_version
        return key


def transit_spec(key: Key) -> KeySpec:
    """The row of ``key`` if Transit serves its spec; 400 naming the spec otherwise."""
    spec = spec_of(key.algorithm)
    if spec.transit_type is None:
        raise invalid(f"the key is a {key.algorithm} key, which the Transit API does not serve (use the REST API)")
    return spec


def spec_for(params: Mapping[str, Any]) -> KeySpec:
    """The row of the Vault ``type`` (and ``key_size``, for ``hmac``) of a create."""
    kind = codec.text(params, "type", "aes256-gcm96")
    rows = [spec for spec in SPECS.values() if spec.transit_type == kind]
    size = codec.number(params, "key_size", high=4096)
    if size not in (None, 0) and kind != "hmac":
        raise invalid(f"key_size: only for hmac keys, not {kind}")
    if kind == "hmac":
        wanted = size or 32
        rows = [spec for spec in rows if spec.key_bytes == wanted]
        if not rows:
            sizes = ", ".join(str(s.key_bytes) for s in SPECS.values() if s.transit_type == "hmac")
            raise invalid(f"key_size: an hmac key here is {sizes} bytes (its HMAC's digest size)")
    if kind in VAULT_TYPES_WITHOUT_ROW:
        raise invalid(f"type: {kind} is refused: no key spec of this service is a {kind} key (the HSM does not do it)")
    if not rows:
        known = sorted({s.transit_type for s in SPECS.values() if s.transit_type})
        raise invalid(f"type: unknown key type {kind} (this service makes {', '.join(known)})")
    return rows[0]


class TransitKeys:
    """``keys/…`` and ``export/…`` (see the module docstring)."""

    def __init__(self, keys: KeyService, lifecycle: LifecycleService, store: TransitStore, hsm: Hsm) -> None:
        self._keys = keys
        self._lifecycle = lifecycle
        self._store = store
        self._hsm = hsm

    # -- changes (each records itself with ``record``) ----------------------------------
    def create(self, call: TransitCall, record: AuditEntry) -> dict[str, Any]:
        """Create the key (version 1 in the HSM), its policy naming its creator; blocking."""
        params = call.params
        codec.only(params, _CREATE_FIELDS)
        spec = spec_for(params)
        _refuse_derivation(params)
        if codec.text(params, "context"):
            raise invalid("context: only derived keys take a context, and they are not served")
        exportable = bool(codec.flag(params, "exportable"))
        usage = spec.default_usage or KeyUsage.SIGN_VERIFY  # Vault's RSA keys sign (ours have one usage)
        rights = rights_for(spec.algorithm, usage) - ({Operation.GET_KEY_MATERIAL} if not exportable else set())
        policy = Policy(grants={right: frozenset({call.principal.name}) for right in rights})
        try:
            new = NewKey(
                call.name,
                algorithm=spec.algorithm,
                policy=policy,
                usage=usage,
                rotation_period_days=_days(codec.duration(params, "auto_rotate_period")),
                description=f"made through the Vault Transit API by {call.principal.name}",
            )
            initial = InitialFacts(lifecycle=Lifecycle.ACTIVE, attributes={}, exportable=True) if exportable else None
            key = self._keys.create(new, record=record, initial=initial)
        except Conflict:
            existing = self._keys.get(call.name, call.principal)
            call.warnings.append(f"key {call.name} already existed")
            call.recorded = False
            return self._shown(call.used(existing), self._store.settings(existing.id))
        return self._shown(call.used(key, 1), TransitSettings())

    def config(self, call: TransitCall, record: AuditEntry) -> dict[str, Any]:
        """Apply Vault's key configuration: the minimum versions, ``deletion_allowed``, the rotation
        period; one record, with the first change made; blocking."""
        params = call.params
        codec.only(params, _CONFIG_FIELDS)
        key = call.used(self._managed(call))
        record = replace(record, key_id=key.id)
        settings = self._store.settings(key.id)
        latest = key.primary_version
        decryption = codec.number(params, "min_decryption_version", high=latest)
        encryption = codec.number(params, "min_encryption_version", high=latest)
        effective = decryption or key.min_decryption_version
        wanted_encryption = settings.min_encryption_version if encryption is None else encryption
        if wanted_encryption and wanted_encryption < effective:
            raise invalid("min_encryption_version: should not be less than min_decryption_version")
        _refuse_backup(params)
        if codec.flag(params, "exportable") and not key.exportable:
            raise invalid(
                "exportable: a key made non-extractable in the HSM cannot become exportable (create it exportable)"
            )
        if codec.flag(params, "exportable") is False and key.exportable:
            raise invalid("exportable: an exportable key cannot be made non-exportable")
        allowed = codec.flag(params, "deletion_allowed")
        period = codec.duration(params, "auto_rotate_period")
        changed = TransitSettings(settings.deletion_allowed if allowed is None else allowed, wanted_encryption)
        pending: AuditEntry | None = record
        if changed != settings:
            self._store.set_settings(key.id, changed, record=pending)
            pending = None
        if decryption:
            key = self._keys.update(key.id, min_decryption_version=decryption, record=pending)
            pending = None
        if period is not None:
            self._keys.set_rotation_period(key.id, _days(period), record=pending)
            pending = None
        if pending is not None:  # nothing changed: the same record, with its own transaction
            self._store.set_settings(key.id, changed, record=pending)
        return self._shown(self._keys.find(key.id), changed)

    def rotate(self, call: TransitCall, record: AuditEntry) -> dict[str, Any]:
        """A new primary version made in the HSM (asymmetric keys have one version: refused); blocking."""
        codec.only(call.params, {"name", "managed_key_name", "managed_key_id"})
        key = self._managed(call)
        rotated = self._lifecycle.rotate(key, record=record)
        call.used(rotated, rotated.primary_version)
        return self._shown(rotated, self._store.settings(key.id))

    def delete(self, call: TransitCall, record: AuditEntry) -> None:
        """Schedule the deletion with the service's deletion window, if ``deletion_allowed``; blocking."""
        key = call.used(self._managed(call))
        if not self._store.settings(key.id).deletion_allowed:
            raise invalid("deletion is not allowed for this key")
        if key.state in (KeyState.PENDING_DELETION, KeyState.DESTROYED):
            return
        self._lifecycle.schedule_deletion(key, None, record=record)

    def trim(self, call: TransitCall, record: AuditEntry) -> None:
        """Refused: single key versions are not destroyed here (``min_decryption_version`` retires them)."""
        call.used(self._managed(call))
        raise invalid(
            "trim: single key versions are not destroyed in this service; raise min_decryption_version "
            "instead (versions below it are never used again), or delete the key"
        )

    def _managed(self, call: TransitCall) -> Key:
        key = self._keys.find(call.name)
        transit_spec(key)
        return key

    # -- reads ------------------------------------------------------------------------------
    async def read(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """The key as Vault shows it (versions, minimum versions, what it supports, public keys)."""
        key = call.used(visible(await snapshot.key(call.name), call.principal))
        transit_spec(key)
        settings = await asyncio.to_thread(self._store.settings, key.id)
        return self._shown(key, settings)

    async def names(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """The names of the keys the principal may see that Transit serves (Vault: 404 when none)."""
        keys = await asyncio.to_thread(self._keys.list, call.principal)
        names = sorted(k.name for k in keys if spec_of(k.algorithm).transit_type and k.state is not KeyState.DESTROYED)
        if not names:
            raise codec.TransitError(404, "")
        return {"keys": names}

    async def export(self, snapshot: Snapshot, call: TransitCall) -> dict[str, Any]:
        """The material of an exportable AES-GCM key's versions (``encryption-key``), or the public keys
        (``public-key``); every other kind is refused by name. Each export is audited by the door."""
        kind = call.route.kind
        key = call.used(await snapshot.key(call.name))
        spec = transit_spec(key)
        if kind == "public-key":
            visible(key, call.principal)
            if not spec.asymmetric:
                raise invalid("public-key: the key has no public key")
            return {"name": key.name, "type": spec.transit_type, "keys": _public_keys(key, self._versions(call, key))}
        if kind != "encryption-key":
            raise invalid(f"{kind}: private and HMAC keys never leave the HSM here (only exportable AES-GCM keys do)")
        if not visible(key, call.principal).exportable:
            raise invalid("key is not exportable")
        usable(key, call.principal, Operation.GET_KEY_MATERIAL)
        shown, versions = {}, self._versions(call, key)
        async with self._keys.exporting(key, versions, _export_entry(call)):
            for number in versions:
                shown[str(number)] = codec.encoded(await self._hsm.aexport(key.versions[number].hsm))
        call.details["versions"] = sorted(int(n) for n in shown)
        return {"name": key.name, "type": spec.transit_type, "keys": shown}

    @staticmethod
    def _versions(call: TransitCall, key: Key) -> list[int]:
        wanted = call.route.argument
        usable_versions = [n for n in sorted(key.versions) if n >= key.min_decryption_version]
        if wanted is None:
            return usable_versions
        number = key.primary_version if wanted == "latest" else codec.number({"version": wanted}, "version", low=1)
        if number not in usable_versions:
            raise invalid("version: the key has no such version it may still use")
        call.key_version = number
        return [number]

    def _shown(self, key: Key, settings: TransitSettings) -> dict[str, Any]:
        """Vault's ``formatKeyPolicy`` of ``key``."""
        spec = transit_spec(key)
        usage = key.key_usage
        shown: dict[str, Any] = {
            "name": key.name,
            "type": spec.transit_type,
            "derived": False,
            "deletion_allowed": settings.deletion_allowed,
            "min_available_version": 0,
            "min_decryption_version": key.min_decryption_version,
            "min_encryption_version": settings.min_encryption_version,
            "latest_version": key.primary_version,
            "exportable": key.exportable,
            "allow_plaintext_backup": False,
            "supports_encryption": usage is KeyUsage.ENCRYPT_DECRYPT,
            "supports_decryption": usage is KeyUsage.ENCRYPT_DECRYPT,
            "supports_signing": usage is KeyUsage.SIGN_VERIFY,
            "supports_derivation": False,
            "auto_rotate_period": (key.rotation_period_days or 0) * DAY,
            "imported_key": key.origin.value == "external",
            "soft_deleted": key.state in (KeyState.PENDING_DELETION, KeyState.DESTROYED),
        }
        if spec.transit_type == "hmac":
            shown["key_size"] = spec.key_bytes
        if spec.asymmetric:
            shown["keys"] = _public_keys(key, sorted(key.versions))
        else:
            shown["keys"] = {str(n): int(v.created_at.timestamp()) for n, v in sorted(key.versions.items())}
        return shown


def _public_keys(key: Key, versions: list[int]) -> dict[str, Any]:
    """Each version's public key as Vault shows it: PEM (ECDSA, RSA) or base64 of the raw key (Ed25519)."""
    spec = spec_of(key.algorithm)
    shown = {}
    for number in versions:
        version = key.versions[number]
        assert version.public_key is not None
        if spec.transit_type == "ed25519":
            raw = public_keys.load(version.public_key).public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            )
            public = codec.encoded(raw)
        else:
            public = public_keys.pem(version.public_key)
        name = (
            spec.transit_type if spec.curve_bits is None or spec.transit_type == "ed25519" else f"P-{spec.curve_bits}"
        )
        shown[str(number)] = {
            "name": name,
            "public_key": public,
            "certificate_chain": "",
            "creation_time": version.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }
    return shown


def _refuse_derivation(params: Mapping[str, Any]) -> None:
    if codec.flag(params, "derived"):
        raise invalid(
            "derived: per-context keys are not served: each key version here is one HSM object used only "
            "in its own mode, and deriving keys from it would need the key outside that mode (docs/transit.md)"
        )
    if codec.flag(params, "convergent_encryption"):
        raise invalid(
            "convergent_encryption: needs derived keys and a caller's nonce, and no nonce here is the caller's"
        )
    _refuse_backup(params)


def _refuse_backup(params: Mapping[str, Any]) -> None:
    if codec.flag(params, "allow_plaintext_backup"):
        raise invalid("allow_plaintext_backup: key material never leaves the HSM in plaintext here")


def _days(seconds: int | None) -> int | None:
    """A Vault rotation period as our whole days (None or 0: no scheduled rotation)."""
    if not seconds:
        return None
    if seconds < 3600:
        raise invalid("auto_rotate_period: auto rotate period must be 0 to disable or at least an hour")
    if seconds % DAY:
        raise invalid("auto_rotate_period: keys here rotate on whole days: give a multiple of 24h")
    return seconds // DAY


def _export_entry(call: TransitCall) -> AuditEntry:
    """What the approval gate learns of an export: who asks (the door writes the export's own record)."""
    return AuditEntry(
        time=datetime.now(UTC),
        action="transit.export",
        outcome=Outcome.OK,
        status=200,
        principal=call.principal.name,
        key_id=call.key_id,
    )
