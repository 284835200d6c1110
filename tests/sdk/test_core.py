"""Error mapping, retries, batching and on-board stream ends, with ``httpx.MockTransport`` (no sockets)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import keymanager_sdk as km
import pytest
from keymanager_sdk import _connection, _core
from keymanager_sdk._core import BATCH_MAX_ITEMS, Core, RetryPolicy

Handler = Callable[[httpx.Request], httpx.Response]
KEY_JSON = {
    "id": "k1",
    "name": "cards",
    "algorithm": "AES_256_GCM",
    "state": "enabled",
    "description": "",
    "primary_version": 1,
    "min_decryption_version": 1,
    "rotation_period_days": None,
    "policy": {"encrypt": ["billing"], "not_before": None},
    "versions": [{"version": 1, "created_at": "2024-01-01T00:00:00Z"}],
    "created_at": "2024-01-01T00:00:00Z",
    "updated_at": "2024-01-01T00:00:00Z",
}


def error(status: int, code: str, message: str = "no", headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"code": code, "message": message}, "request_id": "rid-1"}
    return httpx.Response(status, json=body, headers=headers)


class Recorder:
    """A MockTransport handler answering from a list (the last answer repeats) and recording requests."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def client(handler: Handler, sleeps: list[float] | None = None, **options: Any) -> km.KeyManager:
    sleep = (sleeps if sleeps is not None else []).append
    return km.KeyManager("https://km.test", token="t0k", transport=httpx.MockTransport(handler), sleep=sleep, **options)


def test_exported_surface_is_all() -> None:
    public = {name for name in dir(km) if not name.startswith("_")} - {"cli"}
    assert public == set(km.__all__) - {"__version__"}
    assert all(hasattr(km, name) for name in km.__all__)


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_request", km.InvalidRequest),
        (422, "invalid_request", km.InvalidRequest),
        (400, "decryption_failed", km.DecryptionFailed),
        (401, "unauthenticated", km.Unauthenticated),
        (403, "forbidden", km.Forbidden),
        (404, "not_found", km.NotFound),
        (404, "key_not_found", km.KeyNotFound),
        (409, "conflict", km.Conflict),
        (409, "key_disabled", km.KeyDisabled),
        (409, "key_pending_deletion", km.KeyPendingDeletion),
        (409, "key_destroyed", km.KeyDestroyed),
        (409, "version_below_minimum", km.VersionBelowMinimum),
        (413, "payload_too_large", km.PayloadTooLarge),
        (429, "rate_limited", km.RateLimited),
        (503, "hsm_unavailable", km.HsmUnavailable),
        (503, "database_unavailable", km.DatabaseUnavailable),
        (418, "teapot", km.APIError),
    ],
)
def test_error_codes_map_to_classes(status: int, code: str, cls: type[km.APIError]) -> None:
    with client(Recorder(error(status, code, "why")), max_retries=0) as c, pytest.raises(cls) as raised:
        c.get_key("cards")
    assert type(raised.value) is cls and isinstance(raised.value, km.KeyManagerError)
    assert (raised.value.status, raised.value.code, raised.value.message) == (status, code, "why")
    assert raised.value.request_id == "rid-1"


def test_key_not_found_is_a_not_found() -> None:
    assert issubclass(km.KeyNotFound, km.NotFound) and issubclass(km.APIError, km.KeyManagerError)


def test_non_api_error_body() -> None:
    answer = httpx.Response(502, text="bad gateway", headers={"x-request-id": "r9"})
    with client(Recorder(answer)) as c, pytest.raises(km.APIError) as raised:
        c.list_keys()
    assert (raised.value.status, raised.value.code, raised.value.request_id) == (502, "http_error", "r9")


def test_requests_carry_token_and_json() -> None:
    recorder = Recorder(httpx.Response(200, json={"ciphertext": "km:1:x:1:AA", "key_id": "x", "key_version": 1}))
    with client(recorder) as c:
        assert c.encrypt("my key/1", "4111", {"tenant": "42"}) == "km:1:x:1:AA"
    request = recorder.requests[0]
    assert request.headers["authorization"] == "Bearer t0k"
    assert (
        request.url.path == "/v1/keys/my%20key%2F1/encrypt" or request.url.raw_path == b"/v1/keys/my%20key%2F1/encrypt"
    )
    assert json.loads(request.content) == {"plaintext": "NDExMQ==", "context": {"tenant": "42"}}


def test_typed_key_result() -> None:
    with client(Recorder(httpx.Response(200, json=KEY_JSON))) as c:
        key = c.get_key("cards")
    assert key.policy == km.Policy(encrypt=("billing",))
    assert key.versions[0].version == 1 and key.created_at.year == 2024 and key.deletion_date is None


@pytest.mark.parametrize(
    "failure",
    [error(503, "hsm_unavailable"), error(429, "rate_limited"), httpx.ConnectError("refused")],
)
def test_reads_and_crypto_are_retried(failure: httpx.Response | Exception) -> None:
    ok = httpx.Response(200, json={"plaintext": "AQI="})
    recorder, sleeps = Recorder(failure, failure, ok), []
    with client(recorder, sleeps) as c:
        assert c.decrypt("km:1:x:1:AA") == b"\x01\x02"
    assert len(recorder.requests) == 3 and len(sleeps) == 2


def test_retries_stop_after_max_retries() -> None:
    recorder, sleeps = Recorder(error(503, "hsm_unavailable")), []
    with client(recorder, sleeps, max_retries=5) as c, pytest.raises(km.HsmUnavailable):
        c.list_keys()
    assert len(recorder.requests) == 6 and len(sleeps) == 5


def test_connection_errors_become_transport_errors_after_retries() -> None:
    recorder, sleeps = Recorder(httpx.ConnectError("refused")), []
    with client(recorder, sleeps) as c, pytest.raises(km.TransportError) as raised:
        c.health()
    assert isinstance(raised.value.__cause__, httpx.ConnectError)
    assert len(recorder.requests) == 4 and len(sleeps) == 3


def test_retry_after_is_honoured() -> None:
    ok = httpx.Response(200, json={"status": "ok"})
    recorder, sleeps = Recorder(error(429, "rate_limited", headers={"Retry-After": "7"}), ok), []
    with client(recorder, sleeps) as c:
        c.health()
    assert sleeps == [7.0]


def test_backoff_is_exponential_with_full_jitter() -> None:
    call = Core().health()
    top = Core(RetryPolicy(max_retries=9, backoff_base=0.5, backoff_cap=3.0), rand=lambda: 0.999999)
    assert [round(top.retry_delay(call, n, None) or 0, 3) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]
    assert Core(rand=lambda: 0.0).retry_delay(call, 2, None) == 0.0


@pytest.mark.parametrize(
    "operation",
    [
        lambda c: c.create_key("k"),
        lambda c: c.create_principal("p", "app"),
        lambda c: c.rotate_key("k"),
        lambda c: c.schedule_key_deletion("k", 7),
        lambda c: c.cancel_key_deletion("k"),
        lambda c: c.update_key("k", description="d"),
        lambda c: c.disable_key("k"),
        lambda c: c.delete_principal("p"),
    ],
)
def test_creations_and_changes_are_never_retried(operation: Callable[[km.KeyManager], object]) -> None:
    for failure in (error(503, "hsm_unavailable"), error(429, "rate_limited"), httpx.ConnectError("refused")):
        recorder, sleeps = Recorder(failure), []
        with client(recorder, sleeps) as c, pytest.raises(km.KeyManagerError):
            operation(c)
        assert len(recorder.requests) == 1 and sleeps == []


def test_change_requests_shape() -> None:
    recorder = Recorder(httpx.Response(200, json=KEY_JSON))
    with client(recorder) as c:
        c.disable_key("cards")
        c.update_key("cards", policy=km.Policy(decrypt=("b",)), min_decryption_version=2)
        c.schedule_key_deletion("cards", 9)
    bodies = [json.loads(r.content or b"null") for r in recorder.requests]
    assert bodies[0] == {"enabled": False}
    assert bodies[1]["policy"]["decrypt"] == ["b"] and bodies[1]["min_decryption_version"] == 2
    assert (recorder.requests[2].method, recorder.requests[2].url.params["pending_days"]) == ("DELETE", "9")


def _batch_handler(request: httpx.Request) -> httpx.Response:
    items = json.loads(request.content)["items"]
    results: list[dict[str, Any]] = []
    for item in items:
        if item["plaintext"] == "YmFk":  # "bad"
            results.append({"error": {"code": "payload_too_large", "message": "too big"}})
        else:
            results.append({"ciphertext": "c:" + item["plaintext"], "key_id": "k", "key_version": 1})
    return httpx.Response(200, json={"results": results})


def test_batches_are_chunked_and_item_errors_returned() -> None:
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(len(json.loads(request.content)["items"]))
        return _batch_handler(request)

    items = [f"i{n}" for n in range(2 * BATCH_MAX_ITEMS + 1)]
    items[1500] = "bad"
    with client(handler) as c:
        results = c.encrypt_many("k", items)
    assert seen == [1000, 1000, 1]
    assert isinstance(results[1500], km.PayloadTooLarge) and results[1500].status == 413
    assert [r.ciphertext for r in results[:2] if isinstance(r, km.Encrypted)] == ["c:aTA=", "c:aTE="]


def test_batches_stay_under_the_body_limit() -> None:
    big = [b"x" * 60_000 for _ in range(40)]
    sizes = [len(b) for b in _core.batches(big, lambda item: len(item) * 4 // 3)]
    assert sum(sizes) == 40 and max(sizes) < 40


def test_ready_reports_unavailable_without_raising() -> None:
    answer = httpx.Response(503, json={"status": "unavailable", "hsm": "unavailable", "database": "ok"})
    recorder = Recorder(answer)
    with client(recorder) as c:
        ready = c.ready()
    assert not ready.ok and ready.hsm == "unavailable" and len(recorder.requests) == 1


def test_audit_follows_pages() -> None:
    def record(seq: int) -> dict[str, Any]:
        return {"seq": seq, "time": "2024-01-01T00:00:00Z", "request_id": "r", "principal": "p", "action": "encrypt",
                "key_id": None, "key_version": None, "outcome": "ok", "status": 200, "client": None, "details": {},
                "prev_hash": "0", "hash": "1"}  # fmt: skip

    def handler(request: httpx.Request) -> httpx.Response:
        after = int(request.url.params.get("after", "0"))
        seqs = [s for s in range(after + 1, min(after + 3, 6))]
        return httpx.Response(
            200, json={"records": [record(s) for s in seqs], "next": seqs[-1] if seqs[-1] < 5 else None}
        )

    with client(handler) as c:
        assert [r.seq for r in c.audit()] == [1, 2, 3, 4, 5]
        assert [r.seq for r in c.audit(limit=3)] == [1, 2, 3]


def _stream_answer(body: Iterator[bytes]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["content-type"] == "application/octet-stream"
        uploaded = b"".join(request.stream)  # type: ignore[arg-type]
        assert uploaded == b"z" * 300_000
        assert json.loads(base64.b64decode(request.headers["x-km-context"])) == {"a": "1"}
        return httpx.Response(200, stream=httpx.ByteStream(b"".join(body)))

    return handler


def test_onboard_stream_round_trip_shape() -> None:
    out = io.BytesIO()
    with client(_stream_answer(iter([b"abc", b"def"]))) as c:
        c.decrypt_stream_onboard("k", io.BytesIO(b"z" * 300_000), out, {"a": "1"})
    assert out.getvalue() == b"abcdef"


class _CutStream(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        yield b"partial"
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_cut_onboard_decrypt_stream_is_decryption_failed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_CutStream())

    with client(handler) as c, pytest.raises(km.DecryptionFailed):
        c.decrypt_stream_onboard("k", io.BytesIO(b"abc"), io.BytesIO())


def test_refused_onboard_stream_raises_its_error() -> None:
    with (
        client(Recorder(error(400, "decryption_failed", "decryption failed"))) as c,
        pytest.raises(km.DecryptionFailed),
    ):
        c.decrypt_stream_onboard("k", io.BytesIO(b"abc"), io.BytesIO())


class _CutStream(httpx.SyncByteStream):
    """A response body the server aborts after its first segment."""

    def __iter__(self) -> Iterator[bytes]:
        yield b"authentic segment"
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_a_cut_onboard_decrypt_stream_raises_decryption_failed() -> None:
    km_client = client(lambda request: httpx.Response(200, stream=_CutStream()))
    out = io.BytesIO()
    with pytest.raises(km.DecryptionFailed):
        km_client.decrypt_stream_onboard("blobs", io.BytesIO(b"stream"), out)
    assert out.getvalue() == b"authentic segment"  # what came before the cut was authenticated; discard it all


def test_async_client_retries_and_maps_errors() -> None:
    recorder = Recorder(error(503, "hsm_unavailable"), httpx.ReadTimeout("slow"), httpx.Response(200, json=KEY_JSON))
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def run() -> None:
        transport = httpx.MockTransport(recorder)
        async with km.AsyncKeyManager("https://km.test", transport=transport, sleep=sleep) as c:
            assert (await c.get_key("cards")).name == "cards"
            recorder.answers = [error(503, "hsm_unavailable")]
            with pytest.raises(km.HsmUnavailable):
                await c.create_key("x")

    asyncio.run(run())
    assert len(recorder.requests) == 4 and len(sleeps) == 2


def test_tls_context_verifies_the_server() -> None:
    context = _connection.ssl_context()
    assert context.verify_mode.name == "CERT_REQUIRED" and context.check_hostname


def test_sdk_never_imports_the_server_and_depends_on_httpx_cryptography_and_urllib3_only() -> None:
    code = (
        "import sys, keymanager_sdk, keymanager_sdk.cli\n"
        "assert not [m for m in sys.modules if m == 'keymanager' or m.startswith('keymanager.')]\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "sdk" / "pyproject.toml").read_text())["project"]
    assert [re.split(r"[<>=\[ ]", d)[0] for d in project["dependencies"]] == ["httpx", "cryptography", "urllib3"]
    assert project["scripts"] == {"kmctl": "keymanager_sdk.cli:main"}


ENCRYPTED = httpx.Response(200, json={"ciphertext": "km:1:x:1:AA", "key_id": "x", "key_version": 1})


@pytest.mark.parametrize("bad", [4111, 4111111111111111, [1, 2], None, 1.5, True, {"a": 1}])
def test_a_plaintext_that_is_not_str_or_bytes_is_a_type_error_and_nothing_is_sent(bad: object) -> None:
    recorder = Recorder(ENCRYPTED)
    with client(recorder) as c:
        for call in (
            lambda: c.encrypt("k", bad),  # type: ignore[arg-type]
            lambda: c.encrypt_many("k", ["fine", bad]),  # type: ignore[list-item]
            lambda: c.mac("k", bad),  # type: ignore[arg-type]
        ):
            with pytest.raises(TypeError, match=f"plaintext must be str or bytes-like, not {type(bad).__name__}$"):
                call()
    assert recorder.requests == []


@pytest.mark.parametrize("good", [b"4111", bytearray(b"4111"), memoryview(b"xx4111")[2:], "4111"])
def test_str_and_bytes_like_plaintexts_are_sent_as_their_bytes(good: object) -> None:
    recorder = Recorder(ENCRYPTED)
    with client(recorder) as c:
        c.encrypt("k", good)  # type: ignore[arg-type]
    assert json.loads(recorder.requests[0].content)["plaintext"] == base64.b64encode(b"4111").decode()


def test_a_ciphertext_that_is_not_a_str_is_a_type_error() -> None:
    recorder = Recorder(ENCRYPTED)
    with client(recorder) as c, pytest.raises(TypeError, match="ciphertext must be str, not bytes"):
        c.decrypt(b"km:1:x:1:AA")  # type: ignore[arg-type]
    assert recorder.requests == []


def test_the_encrypt_family_returns_encrypted_a_str_with_key_id_and_version() -> None:
    import copy

    item = {"ciphertext": "km:1:x:1:AA", "key_id": "x", "key_version": 1}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"results": [item]} if request.url.path.endswith("/batch") else item)

    with client(handler) as c:
        single = c.encrypt("k", "4111")
        many = c.encrypt_many("k", ["4111"])
        again = c.reencrypt("k", single)
    for result in (single, many[0], again):
        assert isinstance(result, km.Encrypted) and isinstance(result, str)
        assert result == "km:1:x:1:AA" and (result.key_id, result.key_version) == ("x", 1)
    assert type(single.ciphertext) is str and json.dumps(single) == '"km:1:x:1:AA"'
    assert copy.deepcopy(single) == single and copy.deepcopy(single).key_version == 1  # by __reduce__, as pickle
    assert repr(single) == "Encrypted(ciphertext='km:1:x:1:AA', key_id='x', key_version=1)"
    with pytest.raises(AttributeError):
        single.key_version = 2  # type: ignore[misc]


def test_transport_messages_hint_at_the_likely_mistake() -> None:
    import ssl

    refused = ConnectionRefusedError(111, "Connection refused")
    text = _connection.transport_message("POST", "https://h:8443", "/v1/keys/k/encrypt", refused)
    assert text == "POST https://h:8443/v1/keys/k/encrypt: [Errno 111] Connection refused"
    unverified = ssl.SSLCertVerificationError(1, "certificate verify failed")
    assert "KM_CA" in _connection.transport_message("GET", "https://h:8443", "/v1/health", unverified)
    plain = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    hint = _connection.transport_message("GET", "https://h:8443", "/v1/health", plain).split(": ", 1)[1]
    assert "answer plain HTTP" in hint
    assert "plain HTTP" not in text


def test_the_clients_share_helpers_through_the_pure_modules_not_each_other() -> None:
    import ast

    package = Path(km.__file__).parent
    for module, sibling in (("_async_client", "_client"), ("_client", "_async_client")):
        tree = ast.parse((package / f"{module}.py").read_text())
        imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        imported = {node.module for node in imports} | {f"{n.module}.{a.name}" for n in imports for a in n.names}
        assert f"keymanager_sdk.{sibling}" not in imported, module
