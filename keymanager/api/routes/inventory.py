"""``/v1/inventory``: what the web console reads that no other route gives (``services/overview.py``).

Read-only, for the roles that read the log (auditors and admins: ``services/authorization.py``).
``GET /v1/inventory/keys`` lists every key with its aliases, tags and last use (audited as
``key.inventory``); ``GET /v1/inventory/keys/{key}/hsm-objects`` reads back from the token the
attributes of a version's objects (``key.hsm_objects``); ``GET /v1/inventory/service`` tells the
HSM token and its mechanisms, the database, the doors and their ports (``service.read``, not
audited, as ``/metrics``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from keymanager.api.audit_trail import audited, unaudited
from keymanager.api.deps import AUTHORIZED, AuditDep, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.schemas import ERROR_RESPONSES, QueryInt
from keymanager.api.schemas.keys import KeyOut
from keymanager.domain.names import KEY_REF_RULE, is_key_ref
from keymanager.errors import InvalidRequest
from keymanager.services.overview import LAST_USE_WINDOW

router = APIRouter(
    prefix="/v1/inventory",
    tags=["inventory"],
    responses=ERROR_RESPONSES,
    dependencies=[AUTHORIZED],
    route_class=StrictJsonRoute,
)


class KeyInventoryItem(KeyOut):
    aliases: list[str] = Field(description="The key's further names (KMS aliases), its own name not among them.")
    tags: dict[str, str] = Field(description="The key's tags (the KMS API's TagResource).")
    last_used: datetime | None = Field(
        description=f"Its newest successful use (any door) among the {LAST_USE_WINDOW:,} newest audit records; "
        "null when none is among them."
    )


class ServiceOut(BaseModel):
    token: dict[str, Any] = Field(description="label, module, manufacturer, model, serial (or error).")
    mechanisms: list[dict[str, Any]] = Field(
        description="Every mechanism the token lists: name (CKM_…), min_key_size, max_key_size (the token's "
        "unit), flags (null where the module's flags are not to be trusted)."
    )
    features: dict[str, Any] | None = Field(
        description='What the service can do with this token: {"supported": [...], "unsupported": {feature: why}}.'
    )
    readiness: dict[str, str]
    database: dict[str, Any] = Field(description="dialect, driver, version; PostgreSQL: standby, replicas.")
    doors: list[dict[str, Any]] = Field(description="name, on, host, port, path, auth.")
    process: dict[str, Any] = Field(description="The worker process that answered: pid, workers setting, env.")
    checkpoint: dict[str, Any] | None = Field(
        description="The last audit checkpoint this worker wrote: time, chains, line (null before the first)."
    )
    specs: list[dict[str, Any]] = Field(
        description="Every key spec and usage (algorithm, usage, default_usage) and whether the token supports it."
    )


@router.get("/keys", response_model=list[KeyInventoryItem])
@audited("key.inventory")
async def key_inventory(
    svc: ServicesDep,
    trail: AuditDep,
    key: Annotated[str | None, Query(description="Only this key (name or id); 404 when none is.")] = None,
) -> list[KeyInventoryItem]:
    """Every key (or the one ``key`` names) with its policy by name, aliases, tags and last use."""
    if key is not None:
        if not is_key_ref(key):
            raise InvalidRequest(KEY_REF_RULE)
        trail.details.update(key=key)
    facts = await asyncio.to_thread(svc.overview.keys, key)
    if key is not None and facts:
        trail.key_id = facts[0].key.id
    return [
        KeyInventoryItem(
            **KeyOut.of(f.key, f.policy).model_dump(), aliases=f.aliases, tags=f.tags, last_used=f.last_used
        )
        for f in facts
    ]


class VersionObjectsOut(BaseModel):
    key_id: str
    version: int
    objects: list[dict[str, Any]] = Field(
        description="Each HSM object of the version: role, label, class, key_type, value_len (secret keys), "
        "missing, and attributes (CKA_TOKEN, CKA_SENSITIVE, CKA_EXTRACTABLE, ... as the token reads them back; "
        "null where the token gives none for the class). Never CKA_VALUE."
    )


@router.get("/keys/{key}/hsm-objects", response_model=VersionObjectsOut)
@audited("key.hsm_objects")
async def version_objects(
    key: str,
    svc: ServicesDep,
    trail: AuditDep,
    version: Annotated[QueryInt | None, Query(ge=1, description="A version of the key (default: the primary).")] = None,
) -> VersionObjectsOut:
    """What the HSM token says of the objects of one version of a key (one HSM call): its
    attributes read back, so an auditor sees the key is sensitive, not extractable and never was."""
    if not is_key_ref(key):
        raise InvalidRequest(KEY_REF_RULE)
    found, number, objects = await svc.overview.version_objects(key, version)
    trail.key_id, trail.key_version = found.id, number
    return VersionObjectsOut(key_id=found.id, version=number, objects=objects)


@router.get("/service", response_model=ServiceOut)
@unaudited("service.read")
async def service_facts(svc: ServicesDep) -> ServiceOut:
    """The HSM token, its mechanisms by name and what the service can do with them, readiness, the
    database server, the doors and their ports, and the worker that answered."""
    facts = await svc.overview.service()
    return ServiceOut(
        token=facts.token,
        mechanisms=facts.mechanisms,
        features=facts.features,
        readiness=facts.readiness,
        database=facts.database,
        doors=facts.doors,
        process=facts.process,
        checkpoint=facts.checkpoint,
        specs=facts.specs,
    )
