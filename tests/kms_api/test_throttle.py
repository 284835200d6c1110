"""Unauthenticated KMS calls cannot grow the audit log: they share the REST door's per-address
throttle and summaries (a real server over TLS with a small burst)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Server, running_server

BURST = 5
BOGUS = {
    "X-Amz-Target": "TrentService.MakeCoffee",
    "Content-Type": "application/x-amz-json-1.1",
    "Authorization": "AWS4-HMAC-SHA256 Credential=nobody",
}


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("kms-throttle"),
        workers=1,
        KM_AUTH_FAILURE_BURST=str(BURST),
        KM_AUTH_FAILURES_PER_SECOND="0.01",
    ) as server:
        yield server


def _records(server: Server) -> int:
    with server.client(server.admin_token) as admin:
        return len(admin.get("/v1/audit", params={"limit": 1000}).json()["records"])


def test_a_flood_of_unauthenticated_calls_writes_a_bounded_audit_and_is_throttled(strict: Server) -> None:
    before = _records(strict)
    answers = []
    with strict.client() as client:
        for body in (b"{}", b"not json", b"{" * 1000):
            for _ in range(10):
                answers.append(client.post("/", content=body, headers=BOGUS))
    assert all(a.status_code == 400 for a in answers)
    types = [a.json()["__type"] for a in answers]
    assert types[:BURST] == ["UnknownOperationException"] * BURST
    assert set(types[BURST:]) == {"ThrottlingException"}
    assert all(int(a.headers["retry-after"]) > 0 for a in answers[BURST:])
    assert _records(strict) - before <= 2  # the address's first failure, at most one summary more
