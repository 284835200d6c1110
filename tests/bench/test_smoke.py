"""Smoke test of ``python -m bench``: tiny sizes against a spawned service and the KMS emulator.

Checks that the reports and plots are produced and well-formed; never asserts on timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop  # make test-interop: the bench against spawned services, wrk

ROOT = Path(__file__).resolve().parents[2]
QUICK = ["--duration", "0.4", "--warmup", "0.1"]


def bench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``python -m bench`` from the checkout."""
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_blobs_writes_json_and_plots(tmp_path: Path) -> None:
    done = bench("blobs", "--spawn", "--sizes", "1K,100K", "--concurrency", "2", "--out", str(tmp_path), *QUICK)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "AWS KMS API (local emulator)" in done.stdout
    assert "[1/9 " in done.stdout and "[9/9 " in done.stdout  # a line per measurement (stdout is a pipe)
    report = json.loads((tmp_path / "blobs.json").read_text())
    assert report["ok"] is True and report["errors_total"] == 0
    assert {"cpu_model", "logical_cores", "python", "versions", "tls", "load_generator"} <= report["environment"].keys()
    assert report["environment"]["tls"]["version"].startswith("TLS")
    assert {"keymanager", "keymanager-sdk", "boto3", "moto"} <= report["environment"]["versions"].keys()
    targets = {row["target"] for row in report["rows"]}
    assert targets == {"km", "km-batch", "km-envelope", "aws-kms", "km-kms-api"}
    emulated = [row for row in report["rows"] if row["target"] == "aws-kms"]
    assert all("AWS KMS API (local emulator)" in row["label"] for row in emulated)
    door = [row for row in report["rows"] if row["target"] == "km-kms-api"]
    assert len(door) == 2 and all("keymanager's AWS KMS API" in row["label"] for row in door)
    for row in report["rows"]:
        assert {"ops_per_s", "mb_per_s", "encrypt", "decrypt", "all", "errors", "ops_per_s_spread"} <= row.keys()
        assert {"mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"} <= row["encrypt"].keys()
        assert row["ops_per_s"] > 0
    for m in report["measurements"]:
        assert m["checked"] > 0 and len(m["latencies_ms"]["encrypt"]) > 0
    for name in ("latency-small.svg", "throughput-large.svg"):
        assert (tmp_path / name).read_text().startswith("<svg "), name
    assert not (tmp_path / "ops-vs-concurrency.svg").exists()  # one concurrency level: nothing to draw


def test_targets_judges_every_target_against_a_ceiling_of_the_same_run(tmp_path: Path) -> None:
    done = bench("targets", "--spawn", "--fast", "--out", str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    once = "ceilings (--fast: the ceilings measured once, at the start"
    for text in ("fraction", once, "KMS API CPU per Encrypt vs native REST", "km-kms-api p50", "no verdicts"):
        assert text in done.stdout, text
    assert " met " not in done.stdout  # --fast judges nothing: no verdict column
    report = json.loads((tmp_path / "targets.json").read_text())
    assert report["ok"] is True and report["fast"] is True and report["errors_total"] == 0
    ceilings = report["ceilings"]
    assert {"used", "start", "end", "combined_as"} <= ceilings.keys() and ceilings["combined_as"].startswith("--fast")
    echo = [ceilings[when]["raw_asgi_echo"]["requests_per_s"] for when in ("start", "end", "used")]
    assert echo[0] == echo[1] == echo[2] > 0  # --fast measures the ceilings once
    goals = {t["name"]: t for t in report["targets"]}
    assert len(goals) == 27
    xks_rate = "XKS Encrypt rate with p99 <= 35 ms (open loop)"
    for name, goal in goals.items():
        assert {"measured", "ceiling", "ceiling_name", "fraction", "goal", "kind", "met"} <= goal.keys(), goal
        if name == xks_rate and goal["measured"] is None:  # no rate held (a loaded machine): no verdict
            assert goal["met"] is None and report["informational"]["xks_open_loop"]["highest_within_budget"] is None
            continue
        assert goal["measured"] > 0 and goal["fraction"] > 0 and isinstance(goal["met"], bool), goal
        if goal["kind"] == "absolute":
            assert goal["ceiling"] is None and goal["fraction"] == goal["goal"] / goal["measured"]
        else:
            assert goal["ceiling"] > 0 and goal["fraction"] == goal["measured"] / goal["ceiling"]
    share = goals["1 KB encrypt x4 (wrk)"]
    assert share["kind"] == "share" and share["goal"] == 0.45
    assert share["ceiling"] == ceilings["used"]["raw_asgi_echo"]["requests_per_s"]
    assert share["ceiling_start"] == echo[0] and share["ceiling_end"] == echo[1]
    same_driver = goals["KMS API Encrypt x4 vs the emulator (one wrk)"]
    measured = report["measurements"]
    assert same_driver["ceiling"] == measured["emulator_high"]["summary"]["ops_per_s"]
    assert measured["emulator_high"]["driver"] == measured["kms_api_high"]["driver"] == "wrk"
    native = goals["KMS API CPU per Encrypt vs native REST"]
    assert native["kind"] == "at_most" and native["goal"] == 1.3
    assert native["ceiling"] == measured["rest_gcm_high"]["summary"]["server_cpu_us_per_request"]
    kmip_ops = goals["KMIP Encrypt x4 vs native REST encrypt (one driver)"]
    kmip_cpu = goals["KMIP CPU per Encrypt vs native REST"]
    assert (kmip_ops["kind"], kmip_ops["goal"], kmip_cpu["kind"], kmip_cpu["goal"]) == ("share", 0.8, "at_most", 1.2)
    transit_ops = goals["Transit encrypt x4 vs native REST encrypt (wrk)"]
    transit_cpu = goals["Transit CPU per encrypt vs native REST"]
    assert (transit_ops["kind"], transit_ops["goal"], transit_cpu["kind"], transit_cpu["goal"]) == (
        "share", 0.8, "at_most", 1.2
    )  # fmt: skip
    assert transit_ops["ceiling"] == measured["rest_gcm_high"]["summary"]["ops_per_s"]
    assert measured["transit_high"]["driver"] == measured["rest_gcm_high"]["driver"] == "wrk"
    rounds = {name: m for name, m in measured.items() if name.startswith(("kmip_encrypt_high_", "kmip_native_high_"))}
    assert list(rounds) == ["kmip_encrypt_high_1", "kmip_native_high_1", "kmip_encrypt_high_2", "kmip_native_high_2"]
    assert {m["driver"] for m in rounds.values()} == {"asyncio replay"}
    assert all(m["concurrency"] == 4 and m["checked"] > 0 and m["server_cpu_s"] > 0 for m in rounds.values())
    native_rounds = [m for name, m in rounds.items() if "native" in name]  # the ceiling: their sum
    ops, seconds = sum(m["summary"]["operations"] for m in native_rounds), sum(m["elapsed"] for m in native_rounds)
    assert kmip_ops["ceiling"] == pytest.approx(ops / seconds)
    for name in ("sequential re-encrypt p50 (SDK)", "sequential data key p50 (SDK)", "sequential MAC p50 (SDK)"):
        assert goals[name]["goal"] == 1.5
    for title, ceiling in (("RSA-2048 PSS", "rsa_2048_pss_sign"), ("ECDSA P-256", "ecdsa_p256_sign")):
        for name in (f"{title} sign x4, native (wrk)", f"{title} Sign x4, KMS door (wrk)"):
            sign = goals[name]
            assert (sign["kind"], sign["goal"]) == ("share", 0.60)
            assert sign["ceiling"] == ceilings["used"]["softhsm"][ceiling] > 0
    asymmetric = report["informational"]["asymmetric"]
    assert asymmetric["door_refusals"] == {}
    for name in ("verify_p50_ms", "get_public_key_p50_ms", "derive_shared_secret_p50_ms"):
        assert asymmetric[name] > 0
    assert asymmetric["rsa_2048_pss_sign_cpu_over_echo"] > 0 and asymmetric["ecdsa_p256_sign_cpu_over_echo"] > 0
    assert "asymmetric keys through the SDK, one client, p50: verify" in done.stdout
    assert {"kms_api_boto3_sequential", "emulator_boto3_sequential"} <= report["informational"].keys()
    assert report["informational"]["emulator_cpu_per_encrypt_over_ours"] > 0
    at_quota, within = (
        goals["XKS Encrypt p99 at 1,800/s (open loop)"],
        goals["XKS Encrypt rate with p99 <= 35 ms (open loop)"],
    )
    assert (at_quota["kind"], at_quota["goal"], within["kind"], within["ceiling"]) == (
        "absolute",
        35.0,
        "at_least",
        1800.0,
    )
    xks = report["informational"]["xks_open_loop"]
    assert xks["quota"]["offered_per_s"] == 1800.0 and 1 <= len(xks["tried"]) <= 7
    best = xks["highest_within_budget"]
    assert within["measured"] == (best and best["offered_per_s"]) and (best is None or best["p99_ms"] <= 35)
    assert measured["xks_open_loop_quota"]["driver"] == "open loop (asyncio)"
    assert "XKS Encrypt, open loop (a data key, CDIV asked), at AWS's quota 1,800/s" in done.stdout
    assert all(m["summary"]["error_count"] == 0 for m in measured.values())


def test_kmip_compares_the_kmip_door_with_native_rest_on_one_driver(tmp_path: Path) -> None:
    args = ["--connections", "2", "--duration", "0.3", "--warmup", "0", "--rounds", "1", "--out", str(tmp_path)]
    done = bench("kmip", *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "KMIP Encrypt (TTLV, mTLS) vs native REST" in done.stdout and "goal ≤ 1.2x" in done.stdout
    report = json.loads((tmp_path / "kmip.json").read_text())
    assert list(report["measurements"]) == ["kmip_encrypt_high_1", "kmip_native_high_1"]
    kmip, native = (report["measurements"][name] for name in ("kmip_encrypt_high_1", "kmip_native_high_1"))
    assert (kmip["target"], native["target"]) == ("km-kmip", "km")
    for m in (kmip, native):
        assert m["driver"] == "asyncio replay" and m["errors"] == {} and m["counted"] > 0 and m["server_cpu_s"] > 0
    assert report["ops_share"] == pytest.approx(kmip["summary"]["ops_per_s"] / native["summary"]["ops_per_s"])
    cpu = kmip["summary"]["server_cpu_us_per_request"] / native["summary"]["server_cpu_us_per_request"]
    assert report["cpu_ratio"] == pytest.approx(cpu) and isinstance(report["cpu_ratio_met"], bool)


MEAN_OF_START_AND_END = """
from bench import goals
start = {"raw_asgi_echo": {"requests_per_s": 1000.0, "errors": 0}, "softhsm": {"gcm_1k": 300.0, "processes": 2}}
end = {"raw_asgi_echo": {"requests_per_s": 800.0, "errors": 0}, "softhsm": {"gcm_1k": 500.0, "processes": 2}}
bounds = goals.Ceilings(start, end)
assert bounds.of("raw_asgi_echo", "requests_per_s") == (900.0, 1000.0, 800.0)
assert bounds.of("softhsm", "gcm_1k") == (400.0, 300.0, 500.0) and bounds.used["softhsm"]["processes"] == 2
assert bounds.as_json()["combined_as"] == goals.COMBINED and bounds.as_json()["end"] is end
share = goals.Goal("x", 450.0, "req/s", bounds.used["raw_asgi_echo"]["requests_per_s"], "echo", 0.45, "share")
assert share.fraction == 0.5 and share.met is True
print("ok")
"""


def test_targets_are_judged_against_the_mean_of_the_start_and_end_ceilings() -> None:
    """The full run's ceilings (``--fast`` measures them once): each figure the mean of start and end."""
    done = subprocess.run(
        [sys.executable, "-c", MEAN_OF_START_AND_END], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr[-3000:]


def test_client_reports_cpu_per_call_for_every_path(tmp_path: Path) -> None:
    done = bench("client", "--spawn", "--workers", "1", "--requests", "20", "--rounds", "1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "client.json").read_text())
    paths = {row["path"] for row in report["rows"]}
    assert paths == {
        "sdk KeyManager",
        "sdk AsyncKeyManager",
        "raw urllib3 pool",
        "raw httpx.Client",
        "raw httpx.AsyncClient",
    }
    assert all(row["median_ms"] > 0 and len(row["rounds_ms"]) == 1 for row in report["rows"])


def test_envelope_prints_rates_without_a_service() -> None:
    done = bench("envelope", "--size", "300K", "--segment-size", "64KiB")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all("encrypt" in line and "decrypt" in line for line in lines)
    assert [line.split(",")[2].split(":")[0].strip() for line in lines] == ["memory", "tmpfs files", "disk files"]


def test_ceilings_writes_every_ceiling(tmp_path: Path) -> None:
    done = bench("ceilings", "--duration", "1", "--warmup", "0.5", "--hsm-seconds", "0.1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "ceilings.json").read_text())
    ceilings = report["ceilings"]
    for name in ("raw_asgi_echo", "fastapi_echo"):
        assert ceilings[name]["requests_per_s"] > 0 and ceilings[name]["errors"] == 0
        assert ceilings[name]["server_cpu_us_per_request"] > 0
    hsm = ceilings["softhsm"]
    signs = ("rsa_2048_pss_sign", "ecdsa_p256_sign")
    for name in ("cbc_pad_1k", "hmac_1k", "gcm_1k", "cbc_hmac_pair_1k", "aes_block", "chunked_cbc_mb_per_s", *signs):
        assert hsm[name] > 0 and hsm[f"{name}_per_process"] > 0
    assert "RSA-2048 RSASSA_PSS_SHA_256 sign" in done.stdout and "ECDSA P-256 ECDSA_SHA_256 sign" in done.stdout
    assert ceilings["cryptography_aes_gcm_mb_per_s"] > 0
    assert "Ceilings of this machine" in done.stdout


def test_fastpath_compares_the_two_settings_interleaved(tmp_path: Path) -> None:
    done = bench("fastpath", "--rounds", "1", "--duration", "1", "--warmup", "0.5", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "fastpath.json").read_text())
    assert [run["fast_path"] for run in report["runs"]] == [True, False]
    for run in report["runs"]:
        assert run["requests"] > 0 and run["errors"] == 0 and run["server_cpu_s"] > 0, run
        assert len(run["load_average"]) == 2
    assert {"requests_per_s_gain_pct", "cpu_per_request_saved_pct", "on", "off"} <= report.keys()


def test_compare_runs_both_trees_interleaved_as_fractions_of_ceilings(tmp_path: Path) -> None:
    """``bench compare --base HEAD``: the base tree extracted from git and served from this
    installation; every row's figures are fractions of ceilings measured in the same side's turn."""
    window = ["--rounds", "1", "--duration", "1", "--warmup", "0.5", "--stream-size", "1M", "--hsm-seconds", "0.2"]
    done = bench("compare", "--base", "HEAD", *window, "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "compare.json").read_text())
    assert [run["side"] for run in report["runs"]] == ["base", "head"]
    figures = {"of_echo", "cpu_of_echo", "cpu_us_per_encrypt", "batch_of_pairs", "stream_encrypt_of_cbc",
               "stream_decrypt_of_cbc", "kms_of_emulator", "kmip_of_rest", "kmip_cpu_of_rest"}  # fmt: skip
    for run in report["runs"]:
        assert run["errors"] == 0 and run["encrypt"]["requests"] > 0, run
        assert run["ceilings"]["echo"]["requests_per_s"] > 0 and run["ceilings"]["softhsm"]["cbc_hmac_pair_1k"] > 0
        assert run["emulator"]["summary"]["ops_per_s"] > 0 and run["stream"]["items"] > 0
        assert run["kmip"]["kmip"]["ops_per_s"] > 0 and run["kmip"]["native"]["ops_per_s"] > 0
        assert all(run[name] > 0 for name in figures), run
    assert report["commits"]["base"] and set(report["changes"]) == figures
    assert all(change["moved"] is None for change in report["changes"].values())  # one round judges nothing
    assert "kms_of_emulator (KMS door Encrypt" in done.stdout and "unjudged: one round" in done.stdout


def test_compare_refuses_an_unknown_row(tmp_path: Path) -> None:
    done = bench("compare", "--only", "encrypt,streams", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "'streams' is not a row: choose among encrypt, batch, stream, kms, kmip" in done.stderr
    assert not list(tmp_path.iterdir())


def test_tokenize_reports_rates_beside_the_softhsm_ceiling(tmp_path: Path) -> None:
    args = ["--duration", "0.3", "--warmup", "0.1", "--hsm-seconds", "0.1", "--cards", "300", "--out", str(tmp_path)]
    done = bench("tokenize", *args)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "tokenize.json").read_text())
    ceiling = report["ceiling"]
    assert ceiling["calls_per_token"] == 10 and ceiling["processes"] >= 1
    for name in ("aes_block_per_s", "aes_block_per_s_per_process", "tokens_per_s", "tokens_per_s_one_process"):
        assert ceiling[name] > 0, name
    assert ceiling["tokens_per_s"] == ceiling["aes_block_per_s"] / 10
    for name in ("sequential", "batches"):
        phase = report[name]
        assert phase["tokens"] > 0 and phase["bad_tokens"] == 0 and phase["seconds"] > 0, phase
        assert phase["tokens_per_s"] > 0 and phase["fraction_of_ceiling"] > 0 and len(phase["load_average"]) == 2
    assert report["sequential"]["clients"] == 1 and report["batches"]["clients"] == report["service_workers"] == 2
    assert report["batches"]["tokens"] % 100 == 0
    assert report["round_trip_ok"] is True
    assert report["goal"]["batches_fraction_of_ceiling_at_least"] == 0.4 and isinstance(report["goal"]["met"], bool)
    assert "FF1 card tokens" in done.stdout and "round trip of 20 card numbers: ok" in done.stdout
