"""``python -m bench.scaleout``: the HAProxy configuration it derives from ``deploy/haproxy.cfg``,
checked by HAProxy itself, and the medians of its report. The full run (replicas, PostgreSQL, wrk)
takes minutes and is the bench's own. Run in a subprocess from the checkout, like ``test_smoke``
(here ``bench`` is this test package)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def scaleout(code: str) -> str:
    """What ``code`` prints, run with ``bench.scaleout``'s names imported, from the checkout."""
    done = subprocess.run(
        [sys.executable, "-c", f"from bench.scaleout import *\n{code}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_haproxy_config_is_the_deployed_one_with_local_addresses(tmp_path: Path) -> None:
    text = scaleout("print(haproxy_config(18443, [18001, 18002]), end='')")
    assert "bind 127.0.0.1:18443" in text
    assert "server keymanager-1 127.0.0.1:18001" in text and "server keymanager-2 127.0.0.1:18002" in text
    assert "resolvers" not in text and "keymanager-1:8443" not in text
    deployed = (ROOT / "deploy" / "haproxy.cfg").read_text()
    https, kmip = deployed.split("\nfrontend keymanager_kmip\n", 1)  # the KMIP sections are left out here
    kept = [line for line in https.splitlines() if line.split()[:1] in (["mode"], ["balance"], ["http-check"])]
    assert len(kept) == 4 and all(line in text.splitlines() for line in kept)  # passthrough, leastconn, checks
    assert "keymanager_kmip" not in text
    with_kmip = scaleout("print(haproxy_config(18443, [18001, 18002], (15696, [15001, 15002])), end='')")
    kmip_kept = [line for line in kmip.splitlines() if line.split()[:1] in (["mode"], ["balance"])]
    assert kmip_kept and all(line in with_kmip.splitlines() for line in kmip_kept)
    assert "bind 127.0.0.1:15696" in with_kmip and "server keymanager-1 127.0.0.1:15001 port 18001" in with_kmip
    config = tmp_path / "haproxy.cfg"
    config.write_text(text)
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    checked = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_medians_per_setup_leave_out_missing_figures() -> None:
    found = json.loads(
        scaleout(
            "import json\n"
            "runs = [{'setup': s, 'requests_per_s': r,"
            " 'postgres_cpu_us_per_request': None if s == SETUPS[0] else 200.0}"
            " for s in SETUPS for r in (100.0, 300.0, 200.0)]\n"
            "print(json.dumps([SETUPS, medians(runs)]))"
        )
    )
    setups, medians = found
    assert medians[setups[0]] == {"requests_per_s": 200.0}
    assert medians[setups[2]] == {"requests_per_s": 200.0, "postgres_cpu_us_per_request": 200.0}
