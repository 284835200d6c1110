"""What the SDK's managed-object methods send and how they read the answer, with
``httpx.MockTransport`` (no sockets): the reads are retried on 503, a destroy never is. Against the
real service (objects registered over KMIP): ``tests/kmip/test_objects_sdk.py``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import keymanager_sdk as km
import pytest

from tests.sdk.test_core import Recorder, client, error

OBJECT_ID = "0123456789abcdef0123456789abcdef"
OBJECT_JSON: dict[str, Any] = {
    "id": OBJECT_ID,
    "object_type": "secret_data",
    "state": "deactivated",
    "owner": None,
    "created_at": "2030-01-01T09:00:00+00:00",
    "updated_at": "2030-01-02T03:04:05+00:00",
}


def test_reads_are_retried_and_parsed() -> None:
    recorder = Recorder(error(503, "hsm_unavailable"), httpx.Response(200, json=[OBJECT_JSON]))
    with client(recorder) as c:
        [found] = c.list_objects()
    assert [(r.method, r.url.path) for r in recorder.requests] == [("GET", "/v1/objects")] * 2
    assert found == km.ManagedObject(
        OBJECT_ID,
        "secret_data",
        "deactivated",
        None,
        datetime(2030, 1, 1, 9, tzinfo=UTC),
        datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    recorder = Recorder(error(503, "hsm_unavailable"), httpx.Response(200, json=OBJECT_JSON))
    with client(recorder) as c:
        assert c.get_object(OBJECT_ID).id == OBJECT_ID
    assert [r.url.path for r in recorder.requests] == [f"/v1/objects/{OBJECT_ID}"] * 2


def test_a_destroy_is_never_retried() -> None:
    recorder = Recorder(error(503, "hsm_unavailable"), httpx.Response(200, json={**OBJECT_JSON, "state": "destroyed"}))
    with client(recorder) as c, pytest.raises(km.HsmUnavailable):
        c.destroy_object(OBJECT_ID)
    assert [(r.method, r.url.path) for r in recorder.requests] == [("DELETE", f"/v1/objects/{OBJECT_ID}")]
