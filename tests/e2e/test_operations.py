"""What an operator sees of a real two-worker server: JSON log lines and every worker's process metrics."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import running_server

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


PROCESS_FAMILIES = ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_gc_collections_total")


@pytest.mark.own_server
def test_json_access_log_and_both_workers_process_metrics(tmp_path: Path) -> None:
    with running_server(tmp_path, workers=2, KM_LOG_FORMAT="json", KM_ACCESS_LOG="true") as server:
        with server.client(server.admin_token) as admin:
            made = admin.post("/v1/principals", json={"name": "ops-app", "role": "app"})
            assert made.status_code == 201, made.text
            token = made.json()["token"]
            traced = admin.get("/v1/keys", headers={"X-Request-ID": "lb-4711", "traceparent": TRACEPARENT})
            assert traced.headers["x-request-id"] == "lb-4711" and traced.headers["traceparent"] == TRACEPARENT
            denied = admin.get("/v1/keys", headers={"Authorization": "Bearer not-a-token"})
            assert denied.status_code == 401
            workers = server.worker_pids()
            # Ready means one worker answered; the other may register its samples (each family on its own
            # schedule) a moment later.
            deadline = time.monotonic() + 30
            while True:
                scraped = admin.get("/metrics")
                assert scraped.status_code == 200
                complete = all(_pids_of(family, scraped.text) == set(workers) for family in PROCESS_FAMILIES)
                if complete or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        lines = server.log.read_text().splitlines()

    assert len(workers) == 2
    text = scraped.text
    for family in PROCESS_FAMILIES:
        assert _pids_of(family, text) == set(workers), (family, _pids_of(family, text), workers)
    assert "# TYPE process_cpu_seconds_total counter" in text and "# TYPE python_gc_collections_total counter" in text
    assert len([line for line in text.splitlines() if line.startswith("km_build_info{")]) == 1
    assert "# TYPE km_keys gauge" in text and "# TYPE km_db_pool_connections_in_use gauge" in text

    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert all(not line.strip() or line.startswith(("{", "keymanager serving")) for line in lines), lines
    # not every line is a request's (a worker's start-up lines carry no request id)
    access = {r.get("request_id"): r for r in records if r["logger"] == "keymanager.access"}
    traced_line = access["lb-4711"]
    assert (traced_line["route"], traced_line["status"], traced_line["traceparent"]) == ("/v1/keys", 200, TRACEPARENT)
    assert traced_line["principal_id"] and traced_line["duration_ms"] >= 0 and traced_line["level"] == "INFO"
    assert access[denied.headers["x-request-id"]]["status"] == 401
    assert {r.get("request_id") for r in records} >= {"lb-4711", denied.headers["x-request-id"]}
    log_text = "\n".join(lines)
    for secret in (server.admin_token, token, "not-a-token"):
        assert secret not in log_text


def _pids_of(family: str, text: str) -> set[int]:
    """The worker pids of the samples of ``family`` in a scrape."""
    return {int(p) for p in re.findall(rf'^{family}{{[^}}]*pid="(\d+)"', text, re.MULTILINE)}
