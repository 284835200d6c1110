"""``/v1/health`` (liveness) and ``/v1/ready`` (HSM and database answer)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from keymanager.api.deps import ServicesDep
from keymanager.api.schemas import Health, Readiness
from keymanager.errors import KeyManagerError

router = APIRouter(prefix="/v1", tags=["health"])


@router.get("/health", response_model=Health)
def health() -> Health:
    """Liveness: the process answers."""
    return Health(status="ok")


@router.get("/ready", response_model=Readiness, responses={503: {"model": Readiness}})
def ready(svc: ServicesDep) -> JSONResponse:
    """200 when both the HSM and the database answer; 503 naming the part that does not."""
    parts = {"hsm": svc.hsm.ping, "database": svc.store.ping}
    status = {}
    for name, ping in parts.items():
        try:
            ping()
            status[name] = "ok"
        except KeyManagerError:
            status[name] = "unavailable"
    ok = all(v == "ok" for v in status.values())
    body = Readiness(status="ok" if ok else "unavailable", **status)
    return JSONResponse(status_code=200 if ok else 503, content=body.model_dump())
