"""On-board streams through the app: round trips at segment edges, every tamper case, refusals."""

from __future__ import annotations

import base64
import json
import os
import struct

import pytest
from fastapi.testclient import TestClient

from keymanager.api.routes.streams import StreamAborted
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
    for algorithm in ("AES_256_CBC_HMAC_SHA256", "AES_256_GCM"):
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
@pytest.mark.parametrize("algorithm", ["AES_256_CBC_HMAC_SHA256", "AES_256_GCM"])
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
