"""``/v1/health`` (liveness), ``/v1/ready`` (HSM and database answer) and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from keymanager.api.audit_trail import unaudited
from keymanager.api.deps import AUTHORIZED, ServicesDep
from keymanager.api.json_bodies import StrictJsonRoute
from keymanager.api.metrics import Metrics
from keymanager.api.schemas import OPEN_RESPONSES, error_responses
from keymanager.api.schemas.health import Health, Readiness

router = APIRouter(prefix="/v1", tags=["health"], responses=OPEN_RESPONSES, route_class=StrictJsonRoute)
metrics_router = APIRouter(responses=error_responses(401, 403, 413, 429), route_class=StrictJsonRoute)


@router.get("/health", response_model=Health, response_model_exclude_none=True)
def health(svc: ServicesDep, detail: bool = False) -> Health:
    """Liveness: the process answers. With ``detail=true``, also what the HSM token can and cannot do
    (as this worker read it when its session opened; no call to the HSM is made here)."""
    if not detail:
        return Health(status="ok")
    return Health(status="ok", hsm=svc.readiness.hsm_capabilities())


@router.get(
    "/ready",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "the HSM or the database does not answer"}},
)
def ready(svc: ServicesDep) -> JSONResponse:
    """200 when the HSM and the database answer and neither's last operation failed (an HSM call,
    one past its deadline, an audit write); 503 naming the part that is not ready. Turns 200 again
    by itself once an operation of that part succeeds (see :mod:`keymanager.services.readiness`)."""
    status = {part: "ok" if ok else "unavailable" for part, ok in svc.readiness.check().items()}
    ok = all(v == "ok" for v in status.values())
    body = Readiness(status="ok" if ok else "unavailable", **status)
    return JSONResponse(status_code=200 if ok else 503, content=body.model_dump())


@metrics_router.get("/metrics", response_class=Response, tags=["health"], dependencies=[AUTHORIZED])
@unaudited("metrics.read")
def prometheus_metrics(request: Request) -> Response:
    """Prometheus text: requests by route and status, latencies, HSM operations and errors, audit queue
    and write failures, database pool, keys by state, build and per-worker process metrics."""
    app_metrics: Metrics = request.app.state.metrics
    body, content_type = app_metrics.exposition(before=getattr(request.app.state, "before_scrape", None))
    return Response(content=body, media_type=content_type)
