"""What the web console reads that no other route gives: every key with its aliases, tags and
last use, what the token says of a key version's objects (its attributes read back), and the
service's facts (the HSM token and its mechanisms, the database, the doors).

Read-only, for the principals whose role holds the right to read the log (auditors and admins,
``services/authorization.py``: ``key.inventory``, ``key.hsm_objects``, ``service.read``). Nothing here is key material:
metadata, names, counts and what the token says of itself.

A key's last use is the time of its newest successful record of a use (:data:`USES`: every
action on key material through any door) among the :data:`LAST_USE_WINDOW` newest records of the
audit log: one bounded read, whatever the log's size. A key not used within them shows none.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from keymanager.config import Settings
from keymanager.db import Store
from keymanager.db.inventory import Inventory
from keymanager.domain.key_specs import SPECS
from keymanager.domain.models import Key
from keymanager.domain.policy import Policy
from keymanager.errors import KeyManagerError, NotFound
from keymanager.hsm import Hsm
from keymanager.hsm.capabilities import Capabilities, feature
from keymanager.services.audit_chain import AuditChain
from keymanager.services.authorization import RIGHTS, Right
from keymanager.services.keys import KeyService
from keymanager.services.readiness import Readiness

LAST_USE_WINDOW = 10_000
"""How many of the newest audit records a key's last use is looked for in."""
_READS = frozenset(
    {
        "key.list",
        "key.read",
        "key.public_key",
        "kms.DescribeKey",
        "kms.ListKeys",
        "kms.ListAliases",
        "kmip.GetAttributes",
        "kmip.GetAttributeList",
        "kmip.Locate",
        "xks.GetKeyMetadata",
    }
)
USES = frozenset(a for a, right in RIGHTS.items() if right in (Right.KEY_POLICY, Right.KEY_STORE)) - _READS
"""The actions that use a key's material (the rights table's key actions less its metadata reads)."""


@dataclass(frozen=True)
class KeyFacts:
    """A key as the console lists it: its policy by principal name, its further aliases (its own
    name is not one), its tags and its last use (None: not among the newest records)."""

    key: Key
    policy: Policy
    aliases: list[str]
    tags: dict[str, str]
    last_used: datetime | None


@dataclass(frozen=True)
class ServiceFacts:
    """The service as one worker sees it (see :meth:`Overview.service`)."""

    token: dict[str, Any]
    mechanisms: list[dict[str, Any]]
    features: dict[str, Any] | None
    readiness: dict[str, str]
    database: dict[str, Any]
    doors: list[dict[str, Any]]
    process: dict[str, Any]
    specs: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: dict[str, Any] | None = None


class Overview:
    """The console's reads over the stores, the HSM and the settings (see the module docstring)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        keys: KeyService,
        inventory: Inventory,
        hsm: Hsm,
        readiness: Readiness,
        audit_chain: AuditChain,
    ) -> None:
        self._settings = settings
        self._store = store
        self._keys = keys
        self._inventory = inventory
        self._hsm = hsm
        self._readiness = readiness
        self._audit_chain = audit_chain

    def keys(self, ref: str | None = None) -> list[KeyFacts]:
        """Every key by name (only the one named or identified by ``ref``, KeyNotFound when none is),
        with its aliases, tags and last use. Blocking (database)."""
        found: Sequence[Key] = self._store.list_keys() if ref is None else [self._keys.find(ref)]
        ids = {k.id for k in found}
        aliases: dict[str, list[str]] = {}
        names = {k.id: k.name for k in found}
        for alias in self._store.aliases(ids):
            if alias.name != names.get(alias.key_id):
                aliases.setdefault(alias.key_id, []).append(alias.name)
        tags = self._inventory.tags()
        used = self._inventory.last_uses(USES, LAST_USE_WINDOW)
        policies = self._keys.named([k.policy for k in found])
        return [
            KeyFacts(k, p, aliases.get(k.id, []), tags.get(k.id, {}), used.get(k.id))
            for k, p in zip(found, policies, strict=True)
        ]

    async def version_objects(self, ref: str, version: int | None) -> tuple[Key, int, list[dict[str, Any]]]:
        """The key named or identified by ``ref``, the version asked for (None: its primary), and what
        the token says of that version's objects (one HSM call, with its deadline). KeyNotFound;
        NotFound for a version the key does not have (destroyed keys have none)."""
        key = await asyncio.to_thread(self._keys.find, ref)
        number = key.primary_version if version is None else version
        found = key.versions.get(number)
        if found is None:
            raise NotFound(f"the key has no version {number}")
        return key, number, await self._hsm.aversion_objects(found.hsm)

    async def service(self) -> ServiceFacts:
        """The token (label, module, manufacturer, model, serial) and every mechanism it lists by
        name with its key sizes and flags, what each feature of the service needs of it, readiness,
        the database server, the doors and their ports, this worker process, and the last audit
        checkpoint this process wrote. The token's identity is one HSM call (with its deadline);
        the mechanisms are those read when the session opened."""
        token: dict[str, Any] = {"label": self._settings.pkcs11_token_label, "module": self._settings.pkcs11_module}
        try:
            token["manufacturer"], token["model"], token["serial"] = await self._hsm.aidentity()
        except KeyManagerError as exc:
            token["error"] = exc.code
        capabilities = self._hsm.known_capabilities()
        ready = await asyncio.to_thread(self._readiness.check)
        database = await asyncio.to_thread(self._inventory.database)
        return ServiceFacts(
            token=token,
            mechanisms=[] if capabilities is None else mechanism_table(capabilities),
            features=None if capabilities is None else capabilities.summary(),
            readiness={part: "ok" if ok else "unavailable" for part, ok in ready.items()},
            database=database,
            doors=doors(self._settings),
            process={"pid": os.getpid(), "workers": self._settings.workers, "env": self._settings.env},
            specs=key_specs_offered(capabilities),
            checkpoint=self._checkpoint(),
        )

    def _checkpoint(self) -> dict[str, Any] | None:
        last = self._audit_chain.last_checkpoint()
        if last is None:
            return None
        checkpoint, at = last
        return {"time": at, "chains": len(checkpoint.heads), "line": checkpoint.line()}


def mechanism_table(capabilities: Capabilities) -> list[dict[str, Any]]:
    """Every mechanism the token lists, by PKCS#11 name, with its key sizes (the token's unit) and
    flags (None where the module's flags cannot be trusted: ``hsm/quirks.py``)."""
    rows = []
    for mechanism, info in sorted(capabilities.mechanisms.items(), key=lambda item: item[0].name):
        flags = None
        if capabilities.trust_flags:
            flags = [str(flag.name) for flag in type(info.flags) if flag.name and flag in info.flags]
        rows.append(
            {
                "name": f"CKM_{mechanism.name.lstrip('_')}",  # python-pkcs11 marks deprecated ones with _
                "min_key_size": info.min_key_size,
                "max_key_size": info.max_key_size,
                "flags": flags,
            }
        )
    return rows


def key_specs_offered(capabilities: Capabilities | None) -> list[dict[str, Any]]:
    """Every key spec and usage of the table of key types, and whether this token supports it
    (None: not known yet, the session has not opened)."""
    return [
        {
            "algorithm": algorithm.value,
            "usage": usage.value,
            "default_usage": usage is spec.default_usage,
            "supported": None if capabilities is None else capabilities.has(feature(algorithm, usage)),
        }
        for algorithm, spec in SPECS.items()
        for usage in spec.usages
    ]


def doors(settings: Settings) -> list[dict[str, Any]]:
    """Each door of the service: whether it is on, where (host, port, path) and how its callers authenticate."""
    port, host = settings.port, settings.host
    return [
        {"name": "REST API", "on": True, "host": host, "port": port, "path": "/v1/", "auth": "bearer token, mTLS"},
        {"name": "AWS KMS API", "on": True, "host": host, "port": port, "path": "POST /", "auth": "SigV4"},
        {
            "name": "AWS XKS proxy",
            "on": True,
            "host": host,
            "port": port,
            "path": "/<prefix>/kms/xks/v1/",
            "auth": "SigV4",
        },
        {
            "name": "Vault Transit",
            "on": bool(settings.transit_mount),
            "host": host,
            "port": port,
            "path": ", ".join(f"/v1/{mount}/" for mount in settings.transit_mount),
            "auth": "X-Vault-Token (a bearer token, or AppRole's client token)",
        },
        {
            "name": "KMIP",
            "on": settings.kmip_port != 0,
            "host": host,
            "port": settings.kmip_port or None,
            "path": None,
            "auth": "mTLS",
        },
        {
            "name": "web console",
            "on": settings.ui_enabled(),
            "host": host,
            "port": port,
            "path": "/ui/",
            "auth": "bearer token, mTLS",
        },
    ]
