"""On-board streaming of 70 MB through a real server: round trip, and the workers' memory while it streams."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import keymanager_sdk as km

from tests.e2e.conftest import Server

SIZE = 70 * 1000 * 1000


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def digest_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def test_70_mb_round_trip_keeps_worker_memory_flat(server: Server, tmp_path: Path) -> None:
    with km.KeyManager(server.url, token=server.admin_token, ca=str(server.ca)) as admin:
        token = admin.create_principal("streamer", "app").token
        admin.create_key("blobs", policy={"encrypt": ["streamer"], "decrypt": ["streamer"]})
    warm_up, source = tmp_path / "warm-up.bin", tmp_path / "blob.bin"
    write_random(warm_up, 4 * 1000 * 1000)
    write_random(source, SIZE)
    workers = server.worker_pids()
    assert len(workers) == 2
    # One keep-alive connection, so one worker serves both streams: a first stream of a few MB
    # warms that worker's allocator up (a one-off of a few MB); 70 MB must add no more than a few MB.
    app = km.KeyManager(server.url, token=token, ca=str(server.ca))
    round_trip(app, warm_up, tmp_path)
    before = {pid: rss_kib(pid) for pid in workers}
    peak = dict(before)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in workers:
                peak[pid] = max(peak[pid], rss_kib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        sealed, opened = round_trip(app, source, tmp_path)
    finally:
        app.close()
        done.set()
        sampler.join()
    assert digest_of(opened) == digest_of(source)
    assert sealed.stat().st_size > SIZE
    growth_mib = max(peak[pid] - before[pid] for pid in workers) / 1024
    print(f"worker RSS before {before} KiB, peak {peak} KiB, largest growth {growth_mib:.1f} MiB")
    assert growth_mib < 8


def write_random(path: Path, size: int) -> None:
    with path.open("wb") as out:
        for _ in range(size // (1 << 20) + 1):
            out.write(os.urandom(1 << 20))
        out.truncate(size)


def round_trip(app: km.KeyManager, source: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Encrypt ``source`` on board and decrypt it back; the sealed and the opened file."""
    sealed, opened = tmp_path / f"{source.stem}.kms", tmp_path / f"{source.stem}.out"
    with source.open("rb") as src, sealed.open("wb") as dst:
        app.encrypt_stream_onboard("blobs", src, dst, context={"file": source.name})
    with sealed.open("rb") as src, opened.open("wb") as dst:
        app.decrypt_stream_onboard("blobs", src, dst, context={"file": source.name})
    return sealed, opened
