"""Streams and leftovers against a real two-worker server over TLS.

- a decrypt stream from a principal no policy names is refused 403 and nothing is spooled;
- a stream over ``KM_MAX_STREAM_BYTES`` is refused 413 and leaves no spool file;
- an upload cut mid-way is audited 499 and logged as one WARNING line without a traceback;
- orphaned ``km/`` token objects are destroyed after the grace period, referenced ones never.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.security.conftest import Server, running_server

ROOT = Path(__file__).resolve().parents[2]
MAX_STREAM = 8_000_000
GRACE = 4.0
OCTETS = {"Content-Type": "application/octet-stream"}


@pytest.fixture(scope="module")
def stream_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("streams"),
        KM_MAX_STREAM_BYTES=str(MAX_STREAM),
        KM_ORPHAN_GRACE_SECONDS=str(GRACE),
        KM_MAINTENANCE_INTERVAL_SECONDS="0.5",
    ) as started:
        yield started


@pytest.fixture(scope="module")
def tokens(stream_server: Server) -> dict[str, str]:
    with stream_server.client(stream_server.admin_token) as admin:
        made = {n: admin.post("/v1/principals", json={"name": n, "role": "app"}) for n in ("owner", "stranger")}
        policy = {"encrypt": ["owner"], "decrypt": ["owner"]}
        assert admin.post("/v1/keys", json={"name": "blob", "policy": policy}).status_code == 201
    return {name: response.json()["token"] for name, response in made.items()}


def spool_files(server: Server) -> list[Path]:
    """Spool files (not the areas' lock files) under the server's var/spool."""
    root = server.var_dir / "spool"
    return [p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")] if root.exists() else []


def spooled_bytes(server: Server) -> int:
    """Bytes of the files under var/spool that the server's processes hold open, named or not."""
    root = str((server.var_dir / "spool").resolve())
    sizes = {}
    for pid in [server.pid, *server.worker_pids()]:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd).startswith(root):
                    status = os.stat(fd)
                    sizes[(status.st_dev, status.st_ino)] = status.st_size
            except OSError:
                continue  # closed meanwhile
    return sum(sizes.values())


def stream_head(server: Server, token: str) -> bytes:
    """The header of a real stream of key ``blob`` (what a decryptor reads first)."""
    with server.client(token) as owner:
        sealed = owner.post("/v1/keys/blob/encrypt/stream", content=b"x" * 10, headers=OCTETS)
    assert sealed.status_code == 200, sealed.text
    return sealed.content[: 27 + int.from_bytes(sealed.content[25:27], "big")]


def body(head: bytes, megabytes: int) -> Iterator[bytes]:
    yield head
    for _ in range(megabytes):
        yield bytes(1 << 20)


def audit(server: Server, **params: Any) -> list[dict[str, Any]]:
    with server.client(server.admin_token) as admin:
        answer = admin.get("/v1/audit", params={"limit": 1000, **params})
    assert answer.status_code == 200, answer.text
    records: list[dict[str, Any]] = answer.json()["records"]
    return records


def wait_for(condition: Any, seconds: float, what: str) -> Any:
    """Poll ``condition`` until it returns something true; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds} s: {what}")


def test_a_stranger_decrypt_stream_is_403_and_nothing_is_spooled(stream_server: Server, tokens: dict[str, str]) -> None:
    head = stream_head(stream_server, tokens["owner"])
    seen: list[Path] = []
    peak = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            seen.extend(spool_files(stream_server))
            peak = max(peak, spooled_bytes(stream_server))
            done.wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with stream_server.client(tokens["stranger"]) as stranger:
            refused = stranger.post("/v1/keys/blob/decrypt/stream", content=body(head, 50), headers=OCTETS)
    finally:
        done.set()
        watcher.join()
    assert refused.status_code == 403, refused.text  # the policy, not the size (50 MB > the maximum), decides
    assert refused.json()["error"]["code"] == "forbidden"
    assert seen == [] and peak == 0
    assert spool_files(stream_server) == []


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
def test_a_stream_over_the_maximum_is_413_and_leaves_no_spool(
    stream_server: Server, tokens: dict[str, str], announced: bool
) -> None:
    head = stream_head(stream_server, tokens["owner"])
    content: bytes | Iterator[bytes] = b"".join(body(head, 12)) if announced else body(head, 12)
    with stream_server.client(tokens["owner"]) as owner:
        refused = owner.post("/v1/keys/blob/decrypt/stream", content=content, headers=OCTETS)
    assert refused.status_code == 413, refused.text
    assert refused.json()["error"]["code"] == "payload_too_large"
    assert set(refused.json()) == {"error", "request_id"}
    assert spool_files(stream_server) == []


def test_an_upload_cut_mid_way_is_audited_499_and_logged_once_without_traceback(
    stream_server: Server, tokens: dict[str, str]
) -> None:
    before = len(audit(stream_server, action="key.encrypt_stream"))
    log_start = stream_server.log.stat().st_size
    host, port = stream_server.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(stream_server.ca))
    head = (
        f"POST /v1/keys/blob/encrypt/stream HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {tokens['owner']}\r\n"
        "Content-Type: application/octet-stream\r\nContent-Length: 5000000\r\n\r\n"
    )
    with (
        socket.create_connection((host, int(port)), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(head.encode() + bytes(1 << 20))  # then hang up, 4 MB short

    records = wait_for(
        lambda: audit(stream_server, action="key.encrypt_stream")[before:], 30, "the hang-up's audit record"
    )
    assert [(r["status"], r["principal"]) for r in records] == [(499, "owner")]
    lines = wait_for(
        lambda: [x for x in read_from(stream_server.log, log_start) if "hung up" in x], 30, "the hang-up's log line"
    )
    new = read_from(stream_server.log, log_start)
    assert len(lines) == 1 and " WARNING " in lines[0]
    assert not any("Traceback" in x or " ERROR " in x or x.startswith("ERROR") for x in new), new
    assert spool_files(stream_server) == []


def read_from(log: Path, offset: int) -> list[str]:
    with log.open("rb") as source:
        source.seek(offset)
        return source.read().decode(errors="replace").splitlines()


def token_objects(server: Server, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.token_objects", *args],
        env={**server.env, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_orphaned_token_objects_go_after_the_grace_period_and_referenced_ones_stay(
    stream_server: Server, tokens: dict[str, str]
) -> None:
    with stream_server.client(stream_server.admin_token) as admin:
        kept = admin.post("/v1/keys", json={"name": "kept", "policy": {"encrypt": ["owner"], "decrypt": ["owner"]}})
    assert kept.status_code == 201
    kept_id = kept.json()["id"]
    made_at = time.time()
    orphans = token_objects(stream_server, "make", "f" * 32)
    assert len(orphans) == 2

    def destroyed() -> list[dict[str, Any]]:
        records = audit(stream_server, action="hsm.orphan_destroy")
        return records if len(records) >= len(orphans) else []

    records = wait_for(destroyed, GRACE + 30, "the orphans' destruction")
    assert sorted(r["details"]["label"] for r in records) == sorted(orphans)  # one record each, once
    assert all(r["principal"] == "system" and r["key_id"] == "f" * 32 for r in records)
    assert min(datetime.fromisoformat(r["time"]).timestamp() for r in records) >= made_at + GRACE
    assert token_objects(stream_server, "list", f"km/{'f' * 32}/") == []
    assert len(token_objects(stream_server, "list", f"km/{kept_id}/")) == 2
    with stream_server.client(tokens["owner"]) as owner:
        sealed = owner.post("/v1/keys/kept/encrypt", json={"plaintext": "aGVsbG8="})
        assert sealed.status_code == 200
        opened = owner.post("/v1/keys/kept/decrypt", json={"ciphertext": sealed.json()["ciphertext"]})
    assert opened.json()["plaintext"] == "aGVsbG8="
    with stream_server.client(stream_server.admin_token) as admin:
        assert admin.get("/v1/audit/verify").json()["ok"] is True


def test_dead_workers_spool_areas_are_removed(stream_server: Server, tokens: dict[str, str]) -> None:
    root = stream_server.var_dir / "spool"
    (root / "4000000-deadbeef").mkdir(parents=True, exist_ok=True)  # a dead process's area: no lock held
    (root / "4000000-deadbeef.lock").touch()
    (root / "4000000-deadbeef" / "stream-left").write_bytes(b"ciphertext of a killed process")
    wait_for(lambda: not (root / "4000000-deadbeef").exists(), 30, "the dead area's removal")
    assert not (root / "4000000-deadbeef.lock").exists()
    with stream_server.client() as anyone:
        assert anyone.get("/v1/health").status_code == 200
