"""``python -m bench envelope``: the SDK's envelope encryption and decryption of one blob, alone.

``--size`` (default 70 MB) sealed and opened with a fixed data key in ``--segment-size``
segments (default 256 KiB), best of three: MB/s (10⁶ bytes per second) memory to memory (the
SDK's own cost: the blob in a BytesIO, output counted and dropped), then file to file on tmpfs
(``/dev/shm``) and in the temp directory (disk: page-cache writes of a new file usually bound
the rate there). No service is needed: its part (one data-key call per envelope) is constant.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from keymanager_sdk._envelope import open_stream, read_header, seal_stream
from rich.console import Console

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


def run(args: argparse.Namespace, console: Console) -> int:
    """Print the encrypt and decrypt rates of each setting."""
    size, segment = args.size, args.segment_size
    megabytes = size / 1e6
    blob = os.urandom(size)
    tmpfs = "/dev/shm"  # noqa: S108 - on_files makes a private temporary directory inside it
    runs: dict[str, Callable[[], tuple[float, float]]] = {
        "memory": lambda: in_memory(blob, segment),
        "tmpfs files": lambda: on_files(blob, segment, tmpfs),
        "disk files": lambda: on_files(blob, segment, None),
    }
    for name, measure in runs.items():
        best = [min(pair) for pair in zip(*(measure() for _ in range(3)), strict=True)]
        rates = [megabytes / seconds for seconds in best]
        label = f"{megabytes:g} MB, {segment // 1024} KiB segments, {name}"
        console.print(f"{label}: encrypt {rates[0]:.0f} MB/s, decrypt {rates[1]:.0f} MB/s")
    return 0
