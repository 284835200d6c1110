"""The bodies of the object routes: a managed object that is not a key, as the API shows it (its
metadata: never its value, sealed or not)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from keymanager.domain.models import Lifecycle
from keymanager.services.managed_objects import ShownObject

ObjectType = Literal["secret_data", "opaque_data", "certificate"]


class ObjectOut(BaseModel):
    id: str
    object_type: ObjectType = Field(
        description="What was registered (over KMIP): secret data, an opaque object, a certificate."
    )
    state: Lifecycle = Field(
        description="Its lifecycle state in KMIP's words (pre_active, active, deactivated, compromised, "
        "destroyed, destroyed_compromised)."
    )
    owner: str | None = Field(
        description="The name of the principal that registered it (its id once that principal is deleted)."
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, shown: ShownObject) -> ObjectOut:
        """``shown`` as the API shows it."""
        found = shown.found
        return cls(
            id=found.id,
            object_type=found.object_type.lower(),
            state=found.state,
            owner=shown.owner,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )
