"""Write the known-answer vectors of the KMEV format: ``.venv/bin/python -m tests.sdk.make_vectors``.

The cases are fixed (key, nonce prefix, plaintext), so running this again rewrites the same files.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from keymanager_sdk._envelope import MIN_SEGMENT_SIZE, seal_stream

VECTORS = Path(__file__).parent / "vectors"
S = MIN_SEGMENT_SIZE


def _pattern(size: int) -> bytes:
    return bytes(i % 251 for i in range(size))


CASES: list[dict[str, Any]] = [
    {
        "name": "empty",
        "size": 0,
        "context": None,
        "description": "empty plaintext, no context: one empty final segment",
    },
    {"name": "one-byte", "size": 1, "context": {"tenant": "42", "städt": "Zürich"}, "description": "non-ASCII context"},
    {"name": "empty-context", "size": 100, "context": {}, "description": "100 bytes with the empty context {}"},
    {
        "name": "exact-two-segments",
        "size": 2 * S,
        "context": {"doc": "a"},
        "description": "2·S bytes: the 2nd is final",
    },
    {"name": "multi-segment", "size": 2 * S + 17, "context": {"doc": "b", "a": "1"}, "description": "2·S+17 bytes"},
]


def build(case: dict[str, Any], index: int) -> dict[str, Any]:
    """One vector: a fixed key and prefix per case, sealed by the SDK."""
    data_key = bytes((index * 16 + i) % 256 for i in range(32))
    prefix = bytes(range(index, index + 7))
    wrapped = f"km:1:00000000-0000-4000-8000-00000000000{index}:1:placeholder"
    plaintext = _pattern(case["size"])
    out = io.BytesIO()
    seal_stream(
        io.BytesIO(plaintext), out, data_key=data_key, wrapped_key=wrapped, context=case["context"],
        segment_size=S, nonce_prefix=prefix,
    )  # fmt: skip
    header = {"segment_size": S, "nonce_prefix": prefix.hex(), "wrapped_key": wrapped, "context": case["context"]}
    return {
        "description": case["description"],
        "data_key": data_key.hex(),
        "header": header,
        "plaintext": plaintext.hex(),
        "envelope": out.getvalue().hex(),
    }


def main() -> None:
    VECTORS.mkdir(exist_ok=True)
    for index, case in enumerate(CASES):
        text = json.dumps(build(case, index), indent=1, ensure_ascii=False)
        (VECTORS / f"{case['name']}.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
