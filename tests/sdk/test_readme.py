"""The Python examples of sdk/README.md run, in order, as one program against the real service."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Server

README = Path(__file__).resolve().parents[2] / "sdk" / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_readme_examples_run_as_written(server: Server, tmp_path: Path) -> None:
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 6
    program = tmp_path / "readme_examples.py"
    program.write_text("\n\n".join(blocks))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KM_")}
    env.update(KM_URL=server.url, KM_CA=str(server.ca), KM_ADMIN_TOKEN=server.admin_token)
    done = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("km:1:")
    assert "400 decryption_failed" in done.stdout
