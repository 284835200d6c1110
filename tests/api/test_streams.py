"""On-board streams through the app: round trips at segment edges, every tamper case, refusals."""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from keymanager.api.app import create_app
from keymanager.api.routes.streams import StreamAborted
from keymanager.domain.audit import AuditQuery
from keymanager.domain.stream import read_header
from keymanager.services.container import Services
from tests.api.support import assert_error
from tests.conftest import auth

SEGMENT = 64 * 1024


@pytest.fixture
def small_segments(services: Services) -> None:
    services.settings.stream_segment_bytes = SEGMENT


@pytest.fixture
def app_token(client: TestClient, admin_token: str) -> str:
    made = client.post("/v1/principals", json={"name": "mover", "role": "app"}, headers=auth(admin_token))
    for algorithm in ("AES_256_CBC_HMAC_SHA256", "AES_256_GCM", "AES_128_GCM"):
        policy = {"encrypt": ["mover"], "decrypt": ["mover"]}
        body = {"name": f"blob-{algorithm}", "algorithm": algorithm, "policy": policy}
        assert client.post("/v1/keys", json=body, headers=auth(admin_token)).status_code == 201
    return str(made.json()["token"])


def headers(token: str, context: dict[str, str] | None = None) -> dict[str, str]:
    out = {**auth(token), "Content-Type": "application/octet-stream"}
    if context is not None:
        out["X-KM-Context"] = base64.b64encode(json.dumps(context).encode()).decode()
    return out


def seal(client: TestClient, token: str, key: str, data: bytes, context: dict[str, str] | None = None) -> bytes:
    made = client.post(f"/v1/keys/{key}/encrypt/stream", content=data, headers=headers(token, context))
    assert made.status_code == 200, made.text
    return made.content


def split(stream: bytes) -> tuple[bytes, list[bytes]]:
    """Header and framed segments (prefix included) of an on-board stream."""
    _, offset = read_header(stream)
    segments = []
    position = offset
    while position < len(stream):
        (length,) = struct.unpack(">I", stream[position : position + 4])
        segments.append(stream[position : position + 4 + length])
        position += 4 + length
    return stream[:offset], segments


@pytest.mark.usefixtures("small_segments")
@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM", "AES_128_GCM"])
@pytest.mark.parametrize("size", [0, 1, SEGMENT - 1, SEGMENT, SEGMENT + 1, 3 * SEGMENT + 5])
def test_round_trip_at_segment_edges(client: TestClient, app_token: str, algorithm: str, size: int) -> None:
    data = os.urandom(size)
    key = f"blob-{algorithm}"
    stream = seal(client, app_token, key, data, {"file": "x"})
    _, segments = split(stream)
    assert len(segments) == max(1, -(-size // SEGMENT))
    opened = client.post(f"/v1/keys/{key}/decrypt/stream", content=stream, headers=headers(app_token, {"file": "x"}))
    assert opened.status_code == 200
    assert opened.content == data


@pytest.mark.usefixtures("small_segments")
def test_every_tamper_case_fails(client: TestClient, app_token: str) -> None:
    key = "blob-AES_256_GCM"
    stream = seal(client, app_token, key, os.urandom(3 * SEGMENT + 10))
    head, segments = split(stream)
    flipped = bytearray(segments[1])
    flipped[100] ^= 1
    cases = {
        "byte changed in a segment": head + segments[0] + bytes(flipped) + b"".join(segments[2:]),
        "segment dropped": head + segments[0] + b"".join(segments[2:]),
        "segments reordered": head + segments[1] + segments[0] + b"".join(segments[2:]),
        "segment duplicated": head + segments[0] + segments[0] + b"".join(segments[1:]),
        "truncated after a segment": head + b"".join(segments[:-1]),
        "appended segment": stream + segments[-1],
        "no context where one was not used is fine, another context fails": stream,
    }
    for name, tampered in cases.items():
        context = {"other": "context"} if name.startswith("no context") else None
        with pytest.raises(StreamAborted):
            client.post(f"/v1/keys/{key}/decrypt/stream", content=tampered, headers=headers(app_token, context))
        assert name


@pytest.mark.usefixtures("small_segments")
def test_a_stream_cut_after_its_answer_started_is_recorded_with_its_error(
    client: TestClient, services: Services, app_token: str
) -> None:
    key = "blob-AES_256_GCM"
    stream = seal(client, app_token, key, os.urandom(3 * SEGMENT))
    head, segments = split(stream)
    with pytest.raises(StreamAborted):
        client.post(f"/v1/keys/{key}/decrypt/stream", content=head + segments[1], headers=headers(app_token))
    found = services.audit_records.query(AuditQuery(action="key.decrypt_stream"))
    answers = [(r.entry.status, r.entry.outcome.value, dict(r.entry.details)) for r in found]
    assert answers == [
        (200, "ok", {"key": key}),  # when the answer started
        (400, "error", {"key": key, "error": "decryption_failed"}),  # when it was cut
    ]


@pytest.mark.usefixtures("small_segments")
def test_structural_damage_is_refused_before_any_plaintext(client: TestClient, app_token: str) -> None:
    key = "blob-AES_256_CBC_HMAC_SHA256"
    stream = seal(client, app_token, key, os.urandom(SEGMENT + 1))
    for broken in (stream[:-3], stream + b"\x00", b"not a stream", stream[:10], b""):
        answer = client.post(f"/v1/keys/{key}/decrypt/stream", content=broken, headers=headers(app_token))
        assert_error(answer, 400, "decryption_failed", "decryption failed")
    other_key = client.post("/v1/keys/blob-AES_256_GCM/decrypt/stream", content=stream, headers=headers(app_token))
    assert_error(other_key, 400, "decryption_failed", "decryption failed")


def test_refusals_and_bad_context(client: TestClient, app_token: str, admin_token: str) -> None:
    key = "blob-AES_256_GCM"
    assert_error(
        client.post(f"/v1/keys/{key}/encrypt/stream", content=b"x", headers=headers(admin_token)), 403, "forbidden"
    )
    bad = {**headers(app_token), "X-KM-Context": "%%%"}
    assert_error(client.post(f"/v1/keys/{key}/encrypt/stream", content=b"x", headers=bad), 400, "invalid_request")
    assert_error(
        client.post("/v1/keys/nope/encrypt/stream", content=b"x", headers=headers(app_token)), 404, "key_not_found"
    )


# -- check first, spool later (issue 10) ------------------------------------------------


@pytest.fixture
def stranger_token(client: TestClient, admin_token: str) -> str:
    made = client.post("/v1/principals", json={"name": "stranger", "role": "app"}, headers=auth(admin_token))
    return str(made.json()["token"])


def spool_files(services: Services) -> list[str]:
    root = services.settings.spool_dir
    return [p.name for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")] if root.exists() else []


def chunked(data: bytes, size: int = 16 * 1024) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.usefixtures("small_segments")
def test_policy_and_key_state_are_checked_before_a_byte_is_spooled(
    client: TestClient, services: Services, app_token: str, stranger_token: str, admin_token: str
) -> None:
    key = "blob-AES_256_GCM"
    stream = seal(client, app_token, key, os.urandom(3 * SEGMENT))
    services.spool.quota = 1  # whatever asks the spool for a byte is refused with 413
    refused = client.post(f"/v1/keys/{key}/decrypt/stream", content=stream, headers=headers(stranger_token))
    assert_error(refused, 403, "forbidden")
    garbage = client.post(f"/v1/keys/{key}/decrypt/stream", content=b"not a stream", headers=headers(stranger_token))
    assert_error(garbage, 403, "forbidden")  # decided before the body is read
    refused = client.post(f"/v1/keys/{key}/encrypt/stream", content=b"x" * 100, headers=headers(stranger_token))
    assert_error(refused, 403, "forbidden")
    assert client.patch(f"/v1/keys/{key}", json={"enabled": False}, headers=auth(admin_token)).status_code == 200
    disabled = client.post(f"/v1/keys/{key}/decrypt/stream", content=stream, headers=headers(app_token))
    assert_error(disabled, 409, "key_disabled")
    assert client.patch(f"/v1/keys/{key}", json={"enabled": True}, headers=auth(admin_token)).status_code == 200
    allowed = client.post(f"/v1/keys/{key}/decrypt/stream", content=stream, headers=headers(app_token))
    assert_error(allowed, 413, "payload_too_large")  # the allowed one reached the spool
    assert services.spool.used == 0
    assert spool_files(services) == []


@pytest.mark.usefixtures("small_segments")
@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
def test_a_stream_over_the_maximum_is_413_and_leaves_no_spool(
    client: TestClient, services: Services, app_token: str, announced: bool
) -> None:
    key = "blob-AES_256_CBC_HMAC_SHA256"
    data = os.urandom(4 * SEGMENT)
    stream = seal(client, app_token, key, data)
    services.settings.max_stream_bytes = 2 * SEGMENT
    for route, body in (("decrypt", stream), ("encrypt", data)):
        content = body if announced else chunked(body)
        answer = client.post(f"/v1/keys/{key}/{route}/stream", content=content, headers=headers(app_token))
        body_ = assert_error(answer, 413, "payload_too_large")
        assert str(2 * SEGMENT) in body_["error"]["message"]
        assert services.spool.used == 0
        assert spool_files(services) == []
    services.settings.max_stream_bytes = len(stream)
    opened = client.post(f"/v1/keys/{key}/decrypt/stream", content=chunked(stream), headers=headers(app_token))
    assert opened.status_code == 200 and opened.content == data


@pytest.mark.usefixtures("small_segments")
def test_a_full_spool_answers_503_with_retry_after_until_it_has_room(
    client: TestClient, services: Services, app_token: str
) -> None:
    key = "blob-AES_256_GCM"
    data = os.urandom(2 * SEGMENT)
    stream = seal(client, app_token, key, data)
    services.spool.quota = 3 * SEGMENT
    held = services.spool.open(expected=2 * SEGMENT)  # another stream of this process
    try:
        for content in (stream, chunked(stream)):
            busy = client.post(f"/v1/keys/{key}/decrypt/stream", content=content, headers=headers(app_token))
            assert_error(busy, 503, "spool_busy")
            assert int(busy.headers["retry-after"]) > 0
        busy = client.post(f"/v1/keys/{key}/encrypt/stream", content=data, headers=headers(app_token))
        assert_error(busy, 503, "spool_busy")
        assert services.spool.used == 2 * SEGMENT
        assert len(spool_files(services)) == 1
    finally:
        held.close()
    opened = client.post(f"/v1/keys/{key}/decrypt/stream", content=stream, headers=headers(app_token))
    assert opened.status_code == 200 and opened.content == data
    assert services.spool.used == 0
    assert spool_files(services) == []


def test_spool_areas_of_dead_processes_are_removed_when_the_app_starts(services: Services) -> None:
    root = services.settings.spool_dir
    (root / "4000000-deadbeef").mkdir(parents=True)  # its process is gone: nobody holds the lock
    (root / "4000000-deadbeef.lock").touch()
    (root / "4000000-deadbeef" / "stream-left").write_bytes(b"ciphertext of a killed worker")
    with TestClient(create_app(services=services), base_url="https://testserver") as started:
        assert started.get("/v1/health").status_code == 200
        assert list(root.iterdir()) == []
