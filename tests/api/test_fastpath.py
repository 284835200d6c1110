"""The fast path (``api/fastpath.py``, ``KM_FAST_PATH``) serves exactly the hot routes, and the
way FastAPI would: same status, body, headers and audit record for every answer a hot route gives.

Two apps share one :class:`Services` (the same database, HSM token and caches), one with the fast
path and one without; every case runs on both, and the two answers are compared. A marker the
fast path leaves in the request's scope shows which path served each request, so these tests
fail if the fast path's pattern stops matching (every answer would otherwise still be right,
served by FastAPI).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pydantic import BaseModel
from starlette.types import ASGIApp, Receive, Scope, Send

from keymanager.api import app as app_module
from keymanager.api.app import create_app, hot_routes
from keymanager.api.deps import AuditDep
from keymanager.api.fastpath import SERVED, fast_routes
from keymanager.domain.audit import AuditQuery
from keymanager.domain.models import Role
from keymanager.errors import HsmUnavailable, KeyManagerError, RateLimited
from keymanager.hsm import Hsm
from keymanager.services.container import Services
from keymanager.services.throttle import AuthThrottle
from tests.api.support import b64, unb64
from tests.conftest import auth, make_settings
from tests.support.postgres import create_database, drop_database

HOT = {
    ("POST", "/v1/keys/{key}/encrypt"),
    ("POST", "/v1/keys/{key}/decrypt"),
    ("POST", "/v1/decrypt"),
    ("POST", "/v1/keys/{key}/encrypt/batch"),
    ("POST", "/v1/keys/{key}/decrypt/batch"),
    ("POST", "/v1/keys/{key}/datakey"),
    ("POST", "/v1/keys/{key}/mac"),
    ("POST", "/v1/keys/{key}/mac/verify"),
    ("POST", "/v1/keys/{key}/sign"),
    ("POST", "/v1/keys/{key}/verify"),
}
"""The hot routes, by method and path template."""
MAX_PLAINTEXT, MAX_REQUEST, MAX_BATCH_REQUEST = 1024, 8192, 16384
ECDSA = "ECDSA_SHA_256"
CIPHERTEXT = re.compile(r"km:1:([0-9a-f]{32}):([0-9]+):([A-Za-z0-9+/]+={0,2})")


class Recorder:
    """ASGI wrapper keeping the scope of every HTTP request, as the app left it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.scopes: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.scopes.append(scope)
        await self.app(scope, receive, send)

    def served_fast(self) -> bool:
        """Whether the fast path answered the last request (and FastAPI's router never saw it)."""
        scope = self.scopes[-1]
        fast = scope.get("state", {}).get(SERVED) is True
        assert not (fast and "router" in scope), "FastAPI's router saw a request the fast path answered"
        return fast


@dataclass
class Side:
    client: TestClient
    recorder: Recorder


@dataclass
class Pair:
    fast: Side
    slow: Side
    services: Services
    tokens: dict[str, str]
    samples: dict[str, str]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    """SQLite (the default, under the var dir) or a throwaway PostgreSQL database, each a copy of
    the process's migrated template."""
    if request.param == "sqlite":
        (tmp_path / "var").mkdir(mode=0o700)
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), tmp_path / "var" / "keymanager.db")
        yield None
        return
    url = create_database(template=request.getfixturevalue("postgres_template"))
    yield url
    drop_database(url)


@pytest.fixture
def stopped_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The apps made meanwhile throttle on a clock that stands still: a spent bucket stays spent,
    and both paths compute the same Retry-After, however slowly this machine runs the requests."""
    monkeypatch.setattr(app_module, "AuthThrottle", functools.partial(AuthThrottle, clock=lambda: 1000.0))


@pytest.fixture
def pair(tmp_path: Path, hsm: Hsm, database_url: str | None, stopped_throttle: None) -> Iterator[Pair]:
    """Apps with and without the fast path on one set of services, with small limits."""
    settings = make_settings(
        tmp_path / "var",
        database_url,
        max_plaintext_bytes=MAX_PLAINTEXT,
        max_request_bytes=MAX_REQUEST,
        max_batch_request_bytes=MAX_BATCH_REQUEST,
        max_batch_items=10,
    )
    services = Services.build(settings, hsm=hsm)
    fast = Recorder(create_app(settings, services=services))
    slow = Recorder(create_app(settings.model_copy(update={"fast_path": False}), services=services))
    with (
        TestClient(fast, base_url="https://testserver") as fast_client,
        TestClient(slow, base_url="https://testserver") as slow_client,
    ):
        tokens = {"admin": services.principals.create("admin", Role.ADMIN).token}
        yield Pair(Side(fast_client, fast), Side(slow_client, slow), services, tokens, {})
    services.close()


def setup_keys(pair: Pair) -> None:
    """Principals billing (allowed) and intruder (not); keys of each algorithm, an ECDSA P-256 signing key;
    a disabled key of each kind."""
    client, admin = pair.slow.client, auth(pair.tokens["admin"])
    for name in ("billing", "intruder"):
        made = client.post("/v1/principals", json={"name": name, "role": "app"}, headers=admin)
        pair.tokens[name] = made.json()["token"]
    everything = {op: ["billing"] for op in ("encrypt", "decrypt", "generate_data_key", "mac")}
    for name, algorithm in [
        ("cards", "AES_256_CBC_HMAC_SHA256"),
        ("gcm", "AES_256_GCM"),
        ("blind", "HMAC_SHA256"),
        ("off", "AES_256_GCM"),
        ("blind-off", "HMAC_SHA256"),
    ]:
        made = client.post("/v1/keys", json={"name": name, "algorithm": algorithm, "policy": everything}, headers=admin)
        assert made.status_code == 201, made.text
    signing = {op: ["billing"] for op in ("sign", "verify")}
    for name in ("signer", "signer-off"):
        made = client.post(
            "/v1/keys", json={"name": name, "algorithm": "ECC_NIST_P256", "policy": signing}, headers=admin
        )
        assert made.status_code == 201, made.text
    billing = auth(pair.tokens["billing"])
    for key in ("cards", "gcm", "off"):
        answer = client.post(f"/v1/keys/{key}/encrypt", json={"plaintext": b64(b"4111")}, headers=billing)
        pair.samples[key] = answer.json()["ciphertext"]
    pair.samples["cards+ctx"] = client.post(
        "/v1/keys/cards/encrypt", json={"plaintext": b64(b"ctx"), "context": {"tenant": "a"}}, headers=billing
    ).json()["ciphertext"]
    for key in ("blind", "blind-off"):
        pair.samples[key] = client.post(f"/v1/keys/{key}/mac", json={"data": b64(b"4111")}, headers=billing).json()[
            "mac"
        ]
    for key in ("signer", "signer-off"):
        signed = client.post(
            f"/v1/keys/{key}/sign", json={"message": b64(b"4111"), "algorithm": ECDSA}, headers=billing
        )
        pair.samples[key] = signed.json()["signature"]
    for key in ("off", "blind-off", "signer-off"):
        assert client.patch(f"/v1/keys/{key}", json={"enabled": False}, headers=admin).status_code == 200


def test_fast_routes_are_exactly_the_hot_routes() -> None:
    found = {(method, fast.route.path) for fast in hot_routes() for method in fast.route.methods}
    assert found == HOT
    for fast in hot_routes():
        example = re.sub(r"\{\w+\}", "some-key", fast.route.path)
        assert fast.pattern.match(example), fast.route.path
        assert not fast.pattern.match(example + "/more") and not fast.pattern.match(example + "/")


def example_requests(pair: Pair) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """A successful request to each hot route: (method, template) -> (path, body)."""
    return {
        ("POST", "/v1/keys/{key}/encrypt"): ("/v1/keys/cards/encrypt", {"plaintext": b64(b"x")}),
        ("POST", "/v1/keys/{key}/decrypt"): ("/v1/keys/cards/decrypt", {"ciphertext": pair.samples["cards"]}),
        ("POST", "/v1/decrypt"): ("/v1/decrypt", {"ciphertext": pair.samples["gcm"]}),
        ("POST", "/v1/keys/{key}/encrypt/batch"): ("/v1/keys/gcm/encrypt/batch", {"items": [{"plaintext": "eA=="}]}),
        ("POST", "/v1/keys/{key}/decrypt/batch"): (
            "/v1/keys/cards/decrypt/batch",
            {"items": [{"ciphertext": pair.samples["cards"]}]},
        ),
        ("POST", "/v1/keys/{key}/datakey"): ("/v1/keys/gcm/datakey", {"bits": 128}),
        ("POST", "/v1/keys/{key}/mac"): ("/v1/keys/blind/mac", {"data": b64(b"4111")}),
        ("POST", "/v1/keys/{key}/mac/verify"): (
            "/v1/keys/blind/mac/verify",
            {"data": b64(b"4111"), "mac": pair.samples["blind"]},
        ),
        ("POST", "/v1/keys/{key}/sign"): ("/v1/keys/signer/sign", {"message": b64(b"4111"), "algorithm": ECDSA}),
        ("POST", "/v1/keys/{key}/verify"): (
            "/v1/keys/signer/verify",
            {"message": b64(b"4111"), "signature": pair.samples["signer"], "algorithm": ECDSA},
        ),
    }


def test_every_hot_route_takes_the_fast_path_unless_it_is_off(pair: Pair) -> None:
    setup_keys(pair)
    billing = auth(pair.tokens["billing"])
    examples = example_requests(pair)
    assert set(examples) == HOT
    for path, body in examples.values():
        for side, expected in ((pair.fast, True), (pair.slow, False)):
            answer = side.client.post(path, json=body, headers=billing)
            assert answer.status_code == 200, (path, answer.text)
            assert side.recorder.served_fast() is expected, path
    # Not hot: served by FastAPI on both apps.
    for side in (pair.fast, pair.slow):
        side.client.post("/v1/keys/cards/reencrypt", json={"ciphertext": pair.samples["cards"]}, headers=billing)
        assert not side.recorder.served_fast()
        side.client.get("/v1/keys/cards", headers=billing)
        assert not side.recorder.served_fast()


@dataclass(frozen=True)
class Case:
    """One request: its expected status, and whether the fast path should answer it itself."""

    name: str
    path: str
    body: Any
    status: int | None
    who: str = "billing"
    fast: bool | None = True
    method: str = "POST"
    streamed: bool = False
    """Send the body without Content-Length, so it is cut while read rather than refused upfront."""
    raw: bytes | None = None
    content_type: str = "application/json"


def route_cases(pair: Pair) -> list[Case]:
    """Success and every error class of each hot route."""
    s = pair.samples
    cases = []
    message = b64(b"4111")
    signed = {"message": message, "signature": s["signer"], "algorithm": ECDSA}
    routes: list[tuple[str, str, dict[str, Any], str, str | None]] = [
        # (name, path with {key}, a good body for the key, the key, the disabled key of its kind)
        ("encrypt", "/v1/keys/{key}/encrypt", {"plaintext": b64(b"x")}, "cards", "off"),
        ("decrypt", "/v1/keys/{key}/decrypt", {"ciphertext": s["cards"]}, "cards", "off"),
        ("keyless decrypt", "/v1/decrypt", {"ciphertext": s["cards"]}, "cards", None),
        ("encrypt batch", "/v1/keys/{key}/encrypt/batch", {"items": [{"plaintext": "eA=="}]}, "cards", "off"),
        ("decrypt batch", "/v1/keys/{key}/decrypt/batch", {"items": [{"ciphertext": s["cards"]}]}, "cards", "off"),
        ("data key", "/v1/keys/{key}/datakey", {"bits": 256}, "cards", "off"),
        ("mac", "/v1/keys/{key}/mac", {"data": message}, "blind", "blind-off"),
        ("mac verify", "/v1/keys/{key}/mac/verify", {"data": message, "mac": s["blind"]}, "blind", "blind-off"),
        ("sign", "/v1/keys/{key}/sign", {"message": message, "algorithm": ECDSA}, "signer", "signer-off"),
        ("verify", "/v1/keys/{key}/verify", signed, "signer", "signer-off"),
    ]
    for name, template, body, key, disabled in routes:
        path = template.format(key=key)
        limit = MAX_BATCH_REQUEST if "batch" in name else MAX_REQUEST
        cases += [
            Case(f"{name}: ok", path, body, 200),
            Case(f"{name}: 401", path, body, 401, who="nobody", fast=False),
            Case(f"{name}: 403", path, body, 403, who="intruder"),
            Case(f"{name}: 413 (streamed body)", path, {"padding": "A" * limit}, 413, streamed=True),
            Case(f"{name}: 413 (Content-Length)", path, {"padding": "A" * limit}, 413, fast=False),
            Case(f"{name}: 422 (a list)", path, [body], 422, fast=False),
            Case(f"{name}: 422 (not JSON)", path, None, 422, fast=False, raw=b"{not json"),
            Case(f"{name}: 405", path, None, 405, method="GET", fast=False),
            Case(f"{name}: text/plain", path, None, 422, fast=False, raw=b"{}", content_type="text/plain"),
        ]
        if "{key}" in template:
            cases.append(Case(f"{name}: 404", template.format(key="nope"), body, 404))
        if disabled is not None:
            cases.append(Case(f"{name}: 409", template.format(key=disabled), _for_disabled(body, s), 409))
    return cases + specific_cases(pair)


def _for_disabled(body: dict[str, Any], samples: dict[str, str]) -> dict[str, Any]:
    """``body`` with the ciphertext, MAC or signature of the disabled key of its kind."""
    swapped = {**body}
    if "signature" in swapped:
        swapped["signature"] = samples["signer-off"]
    if "ciphertext" in swapped:
        swapped["ciphertext"] = samples["off"]
    if "mac" in swapped:
        swapped["mac"] = samples["blind-off"]
    if "items" in swapped and "ciphertext" in swapped["items"][0]:
        swapped["items"] = [{"ciphertext": samples["off"]}]
    return swapped


def specific_cases(pair: Pair) -> list[Case]:
    s = pair.samples
    header = s["cards"].rsplit(":", 1)[0]
    unknown = f"km:1:{'0' * 32}:1:" + s["cards"].rsplit(":", 1)[1]
    big = b64(bytes(MAX_PLAINTEXT + 1))
    return [
        Case("encrypt: ok, context", "/v1/keys/gcm/encrypt", {"plaintext": "eQ==", "context": {"t": "a"}}, 200),
        Case("encrypt: ok, charset", "/v1/keys/cards/encrypt", {"plaintext": "eQ=="}, 200, content_type=CHARSET),
        Case("encrypt: 400 base64", "/v1/keys/cards/encrypt", {"plaintext": "not base64!"}, 400),
        Case("encrypt: 413 plaintext", "/v1/keys/cards/encrypt", {"plaintext": big}, 413),
        Case("encrypt: 422 field", "/v1/keys/cards/encrypt", {"plaintex": "eQ=="}, 422, fast=False),
        Case("encrypt: 422 extra", "/v1/keys/cards/encrypt", {"plaintext": "eQ==", "x": 1}, 422, fast=False),
        Case("encrypt: HMAC key", "/v1/keys/blind/encrypt", {"plaintext": "eQ=="}, 400),
        Case("decrypt: ok, context", "/v1/decrypt", {"ciphertext": s["cards+ctx"], "context": {"tenant": "a"}}, 200),
        Case("decrypt: 400 wrong context", "/v1/decrypt", {"ciphertext": s["cards+ctx"]}, 400),
        Case("decrypt: 400 garbage", "/v1/keys/cards/decrypt", {"ciphertext": "garbage"}, 400),
        Case("decrypt: 400 base64", "/v1/keys/cards/decrypt", {"ciphertext": header + ":!!!"}, 400),
        Case("decrypt: other key", "/v1/keys/gcm/decrypt", {"ciphertext": s["cards"]}, 400),
        Case("keyless decrypt: unknown key", "/v1/decrypt", {"ciphertext": unknown}, 400),
        Case("keyless decrypt: 403", "/v1/decrypt", {"ciphertext": s["gcm"]}, 403, who="intruder"),
        Case("keyless decrypt: 409", "/v1/decrypt", {"ciphertext": s["off"]}, 409),
        Case("keyless decrypt: 422", "/v1/decrypt", {"ciphertext": 12}, 422, fast=False),
        Case("encrypt batch: item errors", "/v1/keys/gcm/encrypt/batch", {"items": BATCH_ITEMS}, 200),
        Case("encrypt batch: too many", "/v1/keys/gcm/encrypt/batch", {"items": [{"plaintext": ""}] * 11}, 413),
        Case("encrypt batch: 422 items", "/v1/keys/gcm/encrypt/batch", {"items": "eA=="}, 422, fast=False),
        Case("decrypt batch: item errors", "/v1/keys/cards/decrypt/batch", decrypt_items(s), 200),
        Case("data key: ok, no plaintext", "/v1/keys/cards/datakey", {"include_plaintext": False}, 200),
        Case("data key: ok, 128 bits", "/v1/keys/gcm/datakey", {"bits": 128, "context": {"t": "b"}}, 200),
        Case("data key: 422 bits", "/v1/keys/gcm/datakey", {"bits": 512}, 422, fast=False),
        Case("data key: bits as text", "/v1/keys/gcm/datakey", {"bits": "256"}, 422, fast=False),
        Case("data key: HMAC key", "/v1/keys/blind/datakey", {}, 400),
        Case("mac: 400 base64", "/v1/keys/blind/mac", {"data": "%%%"}, 400),
        Case("mac: 413 data", "/v1/keys/blind/mac", {"data": big}, 413),
        Case("mac: AES key", "/v1/keys/cards/mac", {"data": "eQ=="}, 400),
        Case("mac verify: invalid", "/v1/keys/blind/mac/verify", {"data": "eQ==", "mac": s["blind"]}, 200),
        Case("mac verify: 400 base64", "/v1/keys/blind/mac/verify", {"data": "eQ==", "mac": "?"}, 400),
        Case("mac verify: version", "/v1/keys/blind/mac/verify", {"data": "", "mac": "", "key_version": 9}, 400),
        *sign_cases(pair),
    ] + [Case(f"odd JSON: {raw!r}", path, None, None, raw=raw, fast=None) for path, raw in ODD_JSON]


def sign_cases(pair: Pair) -> list[Case]:
    s, sign, verify = pair.samples, "/v1/keys/signer/sign", "/v1/keys/signer/verify"
    digest, message = b64(hashlib.sha256(b"4111").digest()), b64(b"4111")
    other = {"message": b64(b"4112"), "signature": s["signer"], "algorithm": ECDSA}
    return [
        Case("sign: ok, DIGEST", sign, {"message": digest, "message_type": "DIGEST", "algorithm": ECDSA}, 200),
        Case("sign: 400 base64", sign, {"message": "not base64!", "algorithm": ECDSA}, 400),
        Case("sign: 400 digest length", sign, {"message": message, "message_type": "DIGEST", "algorithm": ECDSA}, 400),
        Case("sign: 400 RAW too long", sign, {"message": b64(bytes(4097)), "algorithm": ECDSA}, 400),
        Case("sign: 400 RSA algorithm", sign, {"message": message, "algorithm": "RSASSA_PSS_SHA_256"}, 400),
        Case("sign: 422 algorithm", sign, {"message": message, "algorithm": "ECDSA_MD5"}, 422, fast=False),
        Case("sign: 422 no algorithm", sign, {"message": message}, 422, fast=False),
        Case("verify: invalid", verify, other, 200),
        Case("verify: not a signature", verify, {**other, "signature": b64(b"xx")}, 200),
        Case("verify: 400 base64", verify, {**other, "signature": "?"}, 400),
        Case("verify: 422 no signature", verify, {"message": message, "algorithm": ECDSA}, 422, fast=False),
    ]


CHARSET = "application/json; charset=utf-8"
ODD_JSON: list[tuple[str, bytes]] = [
    # Bodies where FastAPI's json.loads and pydantic's JSON parser might disagree: any status
    # below 500 (lax or strict types), as long as both paths give the same answer.
    ("/v1/keys/cards/encrypt", b'{"plaintext": "!!", "plaintext": "eA=="}'),
    ("/v1/keys/cards/encrypt", b'{"plaintext": "eA==", "context": {"t": "\\ud800"}}'),
    ("/v1/keys/cards/encrypt", b'{"plaintext": "eA==", "context": {"t": "\xff"}}'),
    ("/v1/keys/cards/encrypt", b'\xef\xbb\xbf{"plaintext": "eA=="}'),
    ("/v1/keys/cards/encrypt", b'{"plaintext": "eA==", "context": {"t": 1}}'),
    ("/v1/keys/cards/encrypt", b'{"plaintext": "eA==", "context": null}'),
    ("/v1/keys/cards/encrypt", b"null"),
    ("/v1/keys/cards/encrypt", b""),
    ("/v1/keys/cards/encrypt", b"  "),
    ("/v1/keys/cards/datakey", b'{"include_plaintext": "false"}'),
    ("/v1/keys/cards/datakey", b'{"include_plaintext": 0}'),
    ("/v1/keys/cards/datakey", b'{"bits": 256.0}'),
    ("/v1/keys/blind/mac/verify", b'{"data": "", "mac": "", "key_version": "1"}'),
    ("/v1/keys/blind/mac/verify", b'{"data": "", "mac": "", "key_version": 1.0}'),
    ("/v1/keys/blind/mac/verify", b'{"data": "", "mac": "", "key_version": NaN}'),
    ("/v1/keys/blind/mac/verify", b'{"data": "", "mac": "", "key_version": 1e400}'),
    ("/v1/keys/gcm/encrypt/batch", b'{"items": [{"plaintext": "eA==", "context": {"a": "b"}}, {}]}'),
    ("/v1/keys/signer/sign", b'{"message": "eA==", "algorithm": "ECDSA_SHA_256", "algorithm": "ECDSA_SHA_384"}'),
    ("/v1/keys/signer/sign", b'{"message": "eA==", "algorithm": "ecdsa_sha_256"}'),
    ("/v1/keys/signer/sign", b'{"message": "eA==", "algorithm": "ECDSA_SHA_256", "message_type": null}'),
    ("/v1/keys/signer/sign", b'{"message": "eA==", "algorithm": "ECDSA_SHA_256", "message_type": "raw"}'),
    ("/v1/keys/signer/sign", b'{"message": "eA==", "algorithm": 1}'),
    ("/v1/keys/signer/verify", b'{"message": "eA==", "signature": "eA==", "algorithm": "ECDSA_SHA_256", "x": 1}'),
]
BATCH_ITEMS = [{"plaintext": "eA=="}, {"plaintext": "!"}, {"plaintext": "eQ==", "context": {"t": "c"}}]


def decrypt_items(samples: dict[str, str]) -> dict[str, Any]:
    return {"items": [{"ciphertext": samples["cards"]}, {"ciphertext": "garbage"}, {"ciphertext": samples["gcm"]}]}


@dataclass
class Answer:
    response: httpx.Response
    body: Any
    headers: dict[str, str | None]
    audit: list[tuple[Any, ...]]
    fast: bool


def ask(pair: Pair, side: Side, case: Case) -> Answer:
    """Send ``case`` to one side; the answer with fresh values replaced by their shape."""
    last = [r.position for r in pair.services.audit_records.query(AuditQuery(limit=1_000_000))]
    headers = {"content-type": case.content_type}
    if case.who != "nobody":
        headers.update(auth(pair.tokens[case.who]))
    else:
        headers["authorization"] = "Bearer not-a-token"
    content = case.raw if case.raw is not None else httpx.Request("POST", "/", json=case.body).content
    response = side.client.request(
        case.method, case.path, content=iter([content]) if case.streamed else content, headers=headers
    )
    assert "Traceback" not in response.text, case.name
    assert response.status_code < 500 or response.status_code == case.status, (case.name, response.text)
    body = response.json()
    if isinstance(body, dict) and "request_id" in body:
        assert body.pop("request_id") == response.headers["x-request-id"], case.name
    assert response.headers.get("x-request-id"), case.name
    records = pair.services.audit_records.query(AuditQuery(after=last[-1] if last else 0, limit=100))
    audit = [
        (e.action, e.outcome, e.status, e.principal, e.key_id, e.key_version, dict(e.details))
        for e in (r.entry for r in records)
    ]
    kept = {name: response.headers.get(name) for name in ("content-type", "retry-after", "allow", "connection")}
    return Answer(response, shape(body), kept, audit, side.recorder.served_fast())


def shape(value: Any) -> Any:
    """``value`` with ciphertexts, data keys and ECDSA signatures (fresh in every answer) replaced by their shape."""
    if isinstance(value, dict):
        shaped = {name: shape(item) for name, item in value.items()}
        if "ciphertext" in value and "key_id" in value and isinstance(value.get("plaintext"), str):
            shaped["plaintext"] = f"<{len(unb64(value['plaintext']))} bytes>"  # a data key
        if "signature" in value and "key_id" in value:
            shaped["signature"] = "<a signature>"  # checked by assert_round_trip
        return shaped
    if isinstance(value, list):
        return [shape(item) for item in value]
    if isinstance(value, str) and (match := CIPHERTEXT.fullmatch(value)):
        return f"km:1:{match[1]}:{match[2]}:<{len(unb64(match[3]))} bytes>"
    return value


def test_both_paths_answer_every_hot_request_alike(pair: Pair) -> None:
    setup_keys(pair)
    cases = route_cases(pair)
    for case in cases:
        fast, slow = ask(pair, pair.fast, case), ask(pair, pair.slow, case)
        assert case.status is None or fast.response.status_code == case.status, (case.name, fast.response.text)
        assert (fast.response.status_code, fast.body) == (slow.response.status_code, slow.body), case.name
        assert fast.headers == slow.headers, case.name
        assert fast.audit == slow.audit, case.name
        assert case.fast is None or fast.fast is case.fast, case.name
        assert slow.fast is False, case.name
        if case.status == 200:
            assert_response_model(case.path, fast.response.json())
            assert_round_trip(pair, case, fast.response.json())
        if case.fast and case.who != "nobody":
            assert len(fast.audit) == 1, (case.name, fast.audit)
    assert {c.status for c in cases} >= {200, 400, 401, 403, 404, 405, 409, 413, 422}


def assert_response_model(path: str, body: dict[str, Any]) -> None:
    """``body`` is exactly what the route's ``response_model`` describes."""
    (route,) = [fast.route for fast in hot_routes() if fast.pattern.match(path)]
    model = route.response_model
    assert isinstance(model, type) and issubclass(model, BaseModel), path
    assert model.model_validate(body).model_dump(mode="json", exclude_none=True) == body, path


def assert_round_trip(pair: Pair, case: Case, body: dict[str, Any]) -> None:
    """Ciphertexts the fast path made open through FastAPI to what was sealed; its signatures verify there."""
    billing = auth(pair.tokens["billing"])
    sent = case.body if case.raw is None else json.loads(case.raw)
    if "signature" in body:
        check = {**sent, "signature": body["signature"]}
        verified = pair.slow.client.post(case.path.removesuffix("/sign") + "/verify", json=check, headers=billing)
        assert verified.json().get("valid") is True, (case.name, verified.text)
    sealed: list[tuple[str, Any, bytes | None]] = []
    if "ciphertext" in body:
        plaintext = sent.get("plaintext", body.get("plaintext"))  # encrypt's, else the data key's
        sealed.append((body["ciphertext"], sent.get("context"), None if plaintext is None else unb64(plaintext)))
    for item, result in zip(sent.get("items", []), body.get("results", []), strict=True):
        if "ciphertext" in result:
            sealed.append((result["ciphertext"], item.get("context"), unb64(item["plaintext"])))
    for ciphertext, context, expected in sealed:
        request = {"ciphertext": ciphertext, "context": context}
        opened = pair.slow.client.post("/v1/decrypt", json=request, headers=billing)
        assert opened.status_code == 200, (case.name, opened.text)
        if expected is not None:
            assert unb64(opened.json()["plaintext"]) == expected, case.name


def test_a_throttled_client_gets_the_same_429_on_both_paths(pair: Pair) -> None:
    refused = Case("encrypt: throttled", "/v1/keys/cards/encrypt", {"plaintext": "eA=="}, 429, who="nobody")
    answers = []
    for side in (pair.fast, pair.slow):
        for _ in range(pair.services.settings.auth_failure_burst):
            assert ask(pair, side, refused).response.status_code == 401
        answers.append(ask(pair, side, refused))
    fast, slow = answers
    assert fast.response.status_code == slow.response.status_code == 429, fast.response.text
    assert fast.body == slow.body and fast.headers == slow.headers and fast.audit == slow.audit
    assert fast.headers["retry-after"] and not fast.fast


def test_fast_routes_refuse_an_endpoint_fastpath_could_not_call() -> None:
    router = APIRouter()

    @router.post("/things/{name}")
    async def missing_trail(name: str, body: Thing, request: Request) -> JSONResponse:
        return JSONResponse({})

    @router.put("/things/{name}")
    async def not_post(name: str, body: Thing, request: Request, trail: AuditDep) -> JSONResponse:
        return JSONResponse({})

    @router.post("/other/{name}")
    def not_async(name: str, body: Thing, request: Request, trail: AuditDep) -> JSONResponse:
        return JSONResponse({})

    @router.post("/fine/{name}")
    async def fine(name: str, body: Thing, request: Request, trail: AuditDep) -> JSONResponse:
        return JSONResponse({})

    assert [f.endpoint for f in fast_routes([router], [fine])] == [fine]
    for endpoint in (missing_trail, not_post, not_async):
        with pytest.raises(TypeError):
            fast_routes([router], [endpoint])


class Thing(BaseModel):
    value: int


@pytest.mark.parametrize("failure", [HsmUnavailable(), RateLimited(retry_after=7)], ids=["503", "429 Retry-After"])
def test_a_failure_inside_the_route_is_answered_alike(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, failure: KeyManagerError
) -> None:
    setup_keys(pair)

    async def fail(*args: object, **kwargs: object) -> bytes:
        raise failure

    monkeypatch.setattr(pair.services.hsm, "aencrypt", fail)
    case = Case("encrypt: HSM fails", "/v1/keys/cards/encrypt", {"plaintext": "eA=="}, failure.status)
    fast, slow = ask(pair, pair.fast, case), ask(pair, pair.slow, case)
    assert fast.response.status_code == slow.response.status_code == failure.status, fast.response.text
    assert fast.body == slow.body and fast.headers == slow.headers and fast.audit == slow.audit
    assert fast.headers["retry-after"] == (None if failure.retry_after is None else str(failure.retry_after))
    assert fast.fast and len(fast.audit) == 1
