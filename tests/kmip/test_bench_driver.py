"""The bench's KMIP driver (``bench/kmip.py``) against the run's KMIP server: a replayed ``Encrypt``
counts as done only when the server says Success, and a refused one counts as an error.

``python -m bench targets --fast`` (``tests/bench/test_smoke.py``) proves the row is produced beside
native REST; this proves the driver's check of each answer can fail. The driver runs in a process
of its own started in the checkout, as the bench tests run the bench (``tests/bench`` would be the
``bench`` package imported here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.kmip.conftest import Identity, KmipServer

ROOT = Path(__file__).resolve().parents[2]
DRIVE = """
import json, sys
from dataclasses import replace
from bench import kmip
from bench.measure import Window
from bench.probes import ServerProbe

host, port, ca, owner, stranger = json.loads(sys.argv[1])
tiny, nothing = Window(warmup=0.0, duration=0.3), ServerProbe.none()
replay = kmip.kmip_replay(kmip.KmipClient(host, port, ca, *owner), 1000)  # the key made, one answer checked
done = kmip.measure_replay(replay, 2, tiny, nothing)
theirs = replace(replay, tls=kmip.KmipClient(host, port, ca, *stranger).tls())  # the same bytes, another principal
refused = kmip.measure_replay(theirs, 2, tiny, nothing)
print(json.dumps({name: m.as_json() for name, m in (("done", done), ("refused", refused))}))
"""


def drive(kmip_server: KmipServer, owner: Identity, stranger: Identity) -> dict[str, dict[str, object]]:
    """The driver's two measurements: the owner's replayed Encrypt, then the stranger's."""
    pair = [[str(i.cert), str(i.key)] for i in (owner, stranger)]
    arguments = json.dumps([kmip_server.host, kmip_server.port, str(kmip_server.ca), *pair])
    done = subprocess.run(
        [sys.executable, "-c", DRIVE, arguments], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    measured: dict[str, dict[str, object]] = json.loads(done.stdout)
    return measured


def test_the_replayed_encrypt_counts_successes_and_refusals(kmip_server: KmipServer) -> None:
    owner = kmip_server.principal("bench-driver", create_keys=True)
    stranger = kmip_server.principal("bench-driver-stranger")
    measured = drive(kmip_server, owner, stranger)

    done, refused = measured["done"], measured["refused"]
    assert done["driver"] == "asyncio replay" and done["server_cpu_s"] is None  # no processes to probe
    assert done["counted"] == done["checked"] > 0 and done["errors"] == {}
    # Every answer to the stranger a KMIP refusal, each counted as an error and none as done.
    assert refused["checked"] > 0 and refused["errors"] == {"refused": refused["checked"]}
    assert refused["counted"] == 0
