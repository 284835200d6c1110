"""The bodies of the health routes: liveness (with the token's capabilities) and readiness."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Health(BaseModel):
    status: str
    hsm: dict[str, Any] | None = Field(
        default=None,
        description="With ?detail=true: what the token can and cannot do, once this worker has read it "
        '({"supported": [features], "unsupported": {feature: the missing mechanisms}}).',
    )


class Readiness(BaseModel):
    status: str
    hsm: str
    database: str
