"""The managed objects that are not keys — secret data, opaque objects, certificates — as the core
knows them: registered through KMIP, listed, read and destroyed through any door
(``services/managed_objects.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from keymanager.domain.models import Lifecycle
from keymanager.domain.policy import Policy


@dataclass(frozen=True)
class ManagedObject:
    """One registered object: its value is stored sealed under an HSM key (``sealed``, opened with the
    key whose AES object is ``seal_label``), never in clear; None once it is destroyed."""

    id: str
    object_type: str
    """PyKMIP's ``ObjectType`` name: ``SECRET_DATA``, ``OPAQUE_DATA``, ``CERTIFICATE``."""
    state: Lifecycle
    owner_id: str | None
    policy: Policy
    """Who may fetch its value besides its owner (``get_key_material``), by principal id."""
    attributes: Mapping[str, Any]
    """What the client set (``doors/kmip/attributes.py``) and the value's own type and length."""
    sealed: bytes | None
    seal_label: str | None
    created_at: datetime
    updated_at: datetime
    details: Mapping[str, Any] = field(default_factory=dict)
