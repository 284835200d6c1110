"""Throughput of envelope encryption and decryption of one blob, with a fixed data key.

Run: ``.venv/bin/python -m tests.sdk.bench_envelope [MEGABYTES] [SEGMENT_KIB]`` (default 70 MB, 256 KiB).
Prints MB/s (10⁶ bytes per second) memory to memory (the SDK's own cost: the blob in a BytesIO,
output counted and dropped), then file to file on tmpfs (``/dev/shm``) and in the temp directory
(disk: page-cache writes of a new file usually bound the rate there). The service's part (one
data-key call per envelope) is left out: it is constant per envelope.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from keymanager_sdk._envelope import open_stream, read_header, seal_stream

KEY = bytes(range(32))


class Sink(io.RawIOBase):
    """A writable stream that counts and drops what it is given."""

    def __init__(self) -> None:
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        size = memoryview(data).nbytes  # type: ignore[arg-type]
        self.count += size
        return size


def _timed(seal: bool, src: BinaryIO, dst: BinaryIO, segment: int) -> float:
    start = time.perf_counter()
    if seal:
        seal_stream(src, dst, data_key=KEY, wrapped_key="bench", segment_size=segment)
    else:
        header, aad = read_header(src)
        open_stream(src, dst, header, aad, KEY)
    return time.perf_counter() - start


def in_memory(blob: bytes, segment: int) -> tuple[float, float]:
    """Seconds to seal and to open ``blob`` from and to memory."""
    seal_seconds = _timed(True, io.BytesIO(blob), Sink(), segment)  # type: ignore[arg-type]
    sealed = io.BytesIO()
    seal_stream(io.BytesIO(blob), sealed, data_key=KEY, wrapped_key="bench", segment_size=segment)
    sink = Sink()
    open_seconds = _timed(False, io.BytesIO(sealed.getvalue()), sink, segment)  # type: ignore[arg-type]
    assert sink.count == len(blob)
    return seal_seconds, open_seconds


def on_files(blob: bytes, segment: int, directory: str | None) -> tuple[float, float]:
    """Seconds to seal and to open ``blob`` file to file in ``directory``."""
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        plain, sealed, opened = Path(tmp, "plain"), Path(tmp, "sealed"), Path(tmp, "opened")
        plain.write_bytes(blob)
        with plain.open("rb") as src, sealed.open("wb") as dst:
            seal_seconds = _timed(True, src, dst, segment)
        with sealed.open("rb") as src, opened.open("wb") as dst:
            open_seconds = _timed(False, src, dst, segment)
        assert opened.stat().st_size == len(blob)
    return seal_seconds, open_seconds


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 70
    segment = (int(sys.argv[2]) if len(sys.argv) > 2 else 256) * 1024
    blob = os.urandom(megabytes * 1_000_000)
    runs = {"memory": lambda: in_memory(blob, segment), "tmpfs files": lambda: on_files(blob, segment, "/dev/shm")}
    runs["disk files"] = lambda: on_files(blob, segment, None)
    for name, run in runs.items():
        best = [min(pair) for pair in zip(*(run() for _ in range(3)), strict=True)]
        rates = [megabytes / seconds for seconds in best]
        label = f"{megabytes} MB, {segment // 1024} KiB segments, {name}"
        print(f"{label}: encrypt {rates[0]:.0f} MB/s, decrypt {rates[1]:.0f} MB/s")


if __name__ == "__main__":
    main()
