"""End to end: a real ``keymanager serve`` (two workers) over real TLS, with bearer tokens and mTLS."""

from __future__ import annotations

import base64
import re
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import E2E_PIN, Server, keymanager
from tests.metrics_support import reaches, settled

CARD = b"4111111111111111"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_init_is_idempotent(server: Server) -> None:
    before = (server.var_dir / "admin.token").read_text()
    again = keymanager("init", env=server.env, cwd=server.var_dir.parent)
    assert again.returncode == 0, again.stderr
    assert "present" in again.stdout
    assert (server.var_dir / "admin.token").read_text() == before
    assert before.strip() not in again.stdout
    assert oct((server.var_dir / "admin.token").stat().st_mode & 0o777) == "0o600"
    assert re.search(r"HSM token '[^']+' supports: .*AES_256_CBC_HMAC_SHA256", again.stdout)


def test_health_detail_lists_what_the_token_can_and_cannot_do(server: Server) -> None:
    with server.client() as client:
        client.get("/v1/ready")  # this worker's session is open: its capabilities are read
        detail = client.get("/v1/health", params={"detail": "true"}).json()
    assert detail["status"] == "ok"
    assert "AES_256_CBC_HMAC_SHA256" in detail["hsm"]["supported"]  # every worker opened its session at start
    for feature, why in detail["hsm"]["unsupported"].items():
        assert feature not in detail["hsm"]["supported"] and "CKM_" in why


def test_health_ready_and_request_id(server: Server) -> None:
    with server.client() as client:
        health = client.get("/v1/health")
        assert health.json() == {"status": "ok"}
        assert re.fullmatch(r"[0-9a-f]{32}", health.headers["x-request-id"])
        assert client.get("/v1/ready").json() == {"status": "ok", "hsm": "ok", "database": "ok"}


def test_tls_below_1_2_is_refused(server: Server) -> None:
    context = ssl.create_default_context(cafile=str(server.ca))
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/v1/health", verify=context)


def test_plain_http_is_not_served(server: Server) -> None:
    with pytest.raises(httpx.HTTPError):
        httpx.get(server.url.replace("https://", "http://") + "/v1/health", timeout=5)


def test_bearer_flow_over_tls(server: Server) -> None:
    """Both encryption algorithms round-trip; one the token lacks is refused by name at creation."""
    supported = server.supported()
    usable = []
    with server.client(server.admin_token) as admin:
        app = admin.post("/v1/principals", json={"name": "e2e-app", "role": "app"})
        assert app.status_code == 201, app.text
        token = app.json()["token"]
        for algorithm in ("AES_256_CBC_HMAC_SHA256", "AES_256_GCM"):
            policy = {"encrypt": ["e2e-app"], "decrypt": ["e2e-app"]}
            key = admin.post("/v1/keys", json={"name": f"e2e-{algorithm}", "algorithm": algorithm, "policy": policy})
            if algorithm in supported:
                assert key.status_code == 201, key.text
                usable.append(algorithm)
            else:
                assert (key.status_code, key.json()["error"]["code"]) == (400, "invalid_request")
                assert f"does not support {algorithm} (no CKM_" in key.json()["error"]["message"]
    assert "AES_256_CBC_HMAC_SHA256" in usable
    with server.client(token) as app_client:
        for algorithm in usable:
            context = {"tenant": "42"}
            encrypted = app_client.post(
                f"/v1/keys/e2e-{algorithm}/encrypt", json={"plaintext": b64(CARD), "context": context}
            )
            assert encrypted.status_code == 200, encrypted.text
            ciphertext = encrypted.json()["ciphertext"]
            decrypted = app_client.post("/v1/decrypt", json={"ciphertext": ciphertext, "context": context})
            assert base64.b64decode(decrypted.json()["plaintext"]) == CARD
            wrong = app_client.post("/v1/decrypt", json={"ciphertext": ciphertext, "context": {"tenant": "43"}})
            assert (wrong.status_code, wrong.json()["error"]["code"]) == (400, "decryption_failed")


def test_client_certificate_authenticates_a_bound_principal(server: Server) -> None:
    tls = server.var_dir / "tls"
    cert = (str(tls / "client-billing.pem"), str(tls / "client-billing-key.pem"))
    with server.client(server.admin_token) as admin:
        bound = admin.post(
            "/v1/principals", json={"name": "mtls-billing", "role": "app", "cert_subject": "CN=billing,O=keymanager"}
        )
        assert bound.status_code == 201, bound.text
        policy = {"encrypt": ["mtls-billing"], "decrypt": ["mtls-billing"]}
        assert admin.post("/v1/keys", json={"name": "mtls-cards", "policy": policy}).status_code == 201
    with server.client(cert=cert) as by_cert:
        keys = by_cert.get("/v1/keys")
        assert keys.status_code == 200, keys.text
        assert [k["name"] for k in keys.json()] == ["mtls-cards"]
        encrypted = by_cert.post("/v1/keys/mtls-cards/encrypt", json={"plaintext": b64(CARD)})
        assert encrypted.status_code == 200, encrypted.text
        decrypted = by_cert.post("/v1/decrypt", json={"ciphertext": encrypted.json()["ciphertext"]})
        assert base64.b64decode(decrypted.json()["plaintext"]) == CARD
    with server.client() as anonymous:
        refused = anonymous.get("/v1/keys")
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthenticated")


ROOT = Path(__file__).resolve().parents[2]
DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""The pages whose marked command blocks the tests run (each marker name is used once)."""
TOOLS = {"KMCTL": str(Path(sys.executable).parent / "kmctl"), "AWS": str(Path(sys.executable).parent / "aws")}
"""What the blocks call ``.venv/bin/kmctl`` and ``.venv/bin/aws``: this test run's."""


def doc_block(name: str) -> str:
    """The code of the block between ``<!-- name:start -->`` and ``<!-- name:end -->`` in the README
    or a page of ``docs/`` (its fence removed)."""
    found = [page.read_text() for page in DOC_PAGES if f"<!-- {name}:start -->" in page.read_text()]
    assert len(found) == 1, f"block {name!r} is in {len(found)} pages"
    block = found[0].split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0].strip()
    return block.split("\n", 1)[1].removesuffix("```")


def run_readme_block(server: Server, name: str) -> str:
    """Run the bash block ``name`` (see ``doc_block``) twice, from the checkout, as a reader running
    it again would; both runs must pass and leave no file behind."""
    script = doc_block(name)
    checkout = server.var_dir.parent
    files_before = {p for p in checkout.iterdir() if p.name != "server.log"}
    outputs = []
    for _ in range(2):
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=checkout,
            env={**server.env, "KM": server.url, "CA": str(server.ca), **TOOLS},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        outputs.append(run.stdout)
    assert {p for p in checkout.iterdir() if p.name != "server.log"} == files_before
    return outputs[-1]


def test_readme_walkthrough_runs_as_written(server: Server) -> None:
    out = run_readme_block(server, "walkthrough")
    assert "4111111111111111" in out
    assert '"code": "forbidden"' in out
    assert '"code": "decryption_failed"' in out
    assert re.search(r"km:1:[0-9a-f]{32}:1:", out)


def test_readme_lifecycle_examples_run_as_written(server: Server) -> None:
    out = run_readme_block(server, "lifecycle").splitlines()
    assert out.count("IBAN DE89") == 2
    assert "version_below_minimum" in out
    assert "key_disabled" in out
    assert "32" in out and "true" in out  # a 256-bit data key; its ciphertext decrypts to it
    assert '["ok","invalid_request"]' in out
    assert '{"ok":true' in " ".join(out)
    assert out[-1].isdigit() and int(out[-1]) > 0


def test_readme_blind_index_example_runs_as_written(server: Server) -> None:
    out = run_readme_block(server, "blind-index")
    assert "same card, same index" in out
    assert "other card, other index" in out
    assert '{"valid":true}' in out


def test_readme_stream_example_runs_as_written(server: Server) -> None:
    assert "identical" in run_readme_block(server, "stream")


def test_metrics_add_up_every_worker(server: Server) -> None:
    def health_count() -> float:
        with server.client(server.admin_token) as admin:
            text = admin.get("/metrics").text
        for line in text.splitlines():
            if line.startswith('km_requests_total{method="GET",route="/v1/health",status="200"}'):
                return float(line.split()[-1])
        return 0.0

    before = settled(health_count)
    for _ in range(30):
        with server.client() as fresh_connection:  # new connections spread over both workers
            assert fresh_connection.get("/v1/health").status_code == 200
    assert reaches(health_count, before + 30) == before + 30


def test_audit_verify_command(server: Server) -> None:
    verified = keymanager("audit", "verify", env=server.env, cwd=server.var_dir.parent)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "chain intact" in verified.stdout


def test_no_secret_in_server_log(server: Server) -> None:
    # Runs last in this module: the log then covers every request above.
    text = server.log.read_text()
    for secret in (E2E_PIN, server.admin_token, "4111111111111111", b64(CARD)):
        assert secret not in text


def test_dual_control_example_runs_as_written(server: Server) -> None:
    out = run_readme_block(server, "dual-control").splitlines()
    assert out[0] == '{"key.delete":{"approvals":1,"approvers":null,"ttl_hours":24}}'
    assert out[1:] == ["enabled", "forbidden", "1", "pending_deletion", '{"state":"executed","approvals":[true]}']
