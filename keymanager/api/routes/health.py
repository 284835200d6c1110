"""``/v1/health`` (liveness), ``/v1/ready`` (HSM and database answer) and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from keymanager.api import metrics
from keymanager.api.deps import ServicesDep, require_role
from keymanager.api.schemas import Health, Readiness
from keymanager.domain.models import Principal, Role
from keymanager.errors import KeyManagerError

router = APIRouter(prefix="/v1", tags=["health"])
metrics_router = APIRouter()
MetricsReader = Annotated[Principal, Depends(require_role(Role.ADMIN, Role.AUDITOR))]


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


@metrics_router.get("/metrics", response_class=Response, tags=["health"])
def prometheus_metrics(reader: MetricsReader, request: Request) -> Response:
    """Prometheus text: requests by route and status, latencies, HSM operations and errors, audit queue
    and write failures, database pool, keys by state, build and per-worker process metrics."""
    body, content_type = metrics.exposition(before=getattr(request.app.state, "before_scrape", None))
    return Response(content=body, media_type=content_type)
