"""One KMIP batch item as the operations see it: who asks, in which protocol version, what its
audit record says, and the batch's ID placeholder (the object the previous item made or named)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from keymanager.domain.audit import AuditEntry, outcome_of
from keymanager.domain.models import Principal
from keymanager.doors.kmip.refusals import invalid


@dataclass
class Batch:
    """What the items of one request message share."""

    request_id: str
    client: str | None
    version: tuple[int, int]
    """The protocol version the request speaks."""
    id_placeholder: str | None = None
    """The unique identifier an item that names none means (KMIP's ID Placeholder)."""


@dataclass
class KmipCall:
    """One batch item of an authenticated principal; what its audit record names."""

    principal: Principal
    operation: str
    batch: Batch
    key_id: str | None = None
    key_version: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    success_taken: bool = False
    """Whether the operation took its success record, to commit with its change or its key use."""

    @property
    def action(self) -> str:
        """The audit action and the action :func:`~keymanager.services.authorization.authorize` is asked for."""
        return f"kmip.{self.operation}"

    @property
    def version(self) -> tuple[int, int]:
        return self.batch.version

    def uid(self, given: str | None) -> str:
        """The unique identifier the item names, else the batch's ID placeholder."""
        if given:
            return given
        if self.batch.id_placeholder is None:
            raise invalid("the request names no unique identifier and none came before it in the batch")
        return self.batch.id_placeholder

    def success(self, key_id: str | None = None, key_version: int | None = None) -> AuditEntry:
        """The record of this item's success, for the operation to commit with its change or key use."""
        if key_id is not None:
            self.key_id, self.key_version = key_id, key_version
        self.success_taken = True
        return self.entry(200)

    def entry(self, status: int, error: str | None = None) -> AuditEntry:
        """The audit entry of this item answered with ``status`` (``error``: a refusal's reason)."""
        details = dict(self.details)
        if error is not None:
            details["error"] = error
        return AuditEntry(
            time=datetime.now(UTC),
            action=self.action,
            outcome=outcome_of(status),
            status=status,
            request_id=self.batch.request_id,
            principal=self.principal.name,
            key_id=self.key_id,
            key_version=self.key_version,
            client=self.batch.client,
            details=details,
        )
