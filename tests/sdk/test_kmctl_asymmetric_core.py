"""``kmctl keys sign|verify|public-key`` and ``keys create --usage`` against the native routes'
fixed shapes, with ``httpx.MockTransport`` behind the client kmctl builds (no sockets): what each
command sends, prints and exits with. The same commands against the real service are in
``tests/sdk/test_asymmetric.py``."""

from __future__ import annotations

import base64
import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import keymanager_sdk as km
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from keymanager_sdk.cli import main

from tests.sdk.test_core import KEY_JSON, Recorder, error

EC_KEY = ec.generate_private_key(ec.SECP256R1())
DER = EC_KEY.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
PEM = EC_KEY.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes


def run(recorder: Recorder, *args: str, stdin: bytes = b"") -> Ran:
    """One kmctl command in this process, its client answering from ``recorder``."""
    streams = {name: io.TextIOWrapper(io.BytesIO(stdin if name == "stdin" else b""), write_through=True)
               for name in ("stdin", "stdout", "stderr")}  # fmt: skip
    client = km.KeyManager("https://km.test", token="t", transport=httpx.MockTransport(recorder), max_retries=0)
    with mock.patch("keymanager_sdk.cli._client", return_value=client), mock.patch.multiple(sys, **streams):
        code = main(list(args))
    out, err = (streams[name].buffer for name in ("stdout", "stderr"))
    return Ran(code, out.getvalue(), err.getvalue())  # type: ignore[attr-defined]


def body(recorder: Recorder, index: int = 0) -> Any:
    return json.loads(recorder.requests[index].content)


def signed(signature: bytes = b"\x30\x45sig") -> httpx.Response:
    return httpx.Response(200, json={"signature": base64.b64encode(signature).decode(), "key_id": "k1",
                                     "algorithm": "ECDSA_SHA_256"})  # fmt: skip


def test_sign_reads_stdin_and_prints_base64(tmp_path: Path) -> None:
    recorder = Recorder(signed())
    done = run(recorder, "keys", "sign", "docs", "--algorithm", "ECDSA_SHA_256", stdin=b"the message")
    assert (done.returncode, done.stdout) == (0, base64.b64encode(b"\x30\x45sig") + b"\n"), done.stderr
    assert recorder.requests[0].url.path == "/v1/keys/docs/sign"
    expected = {
        "message": base64.b64encode(b"the message").decode(),
        "message_type": "RAW",
        "algorithm": "ECDSA_SHA_256",
    }
    assert body(recorder) == expected


def test_sign_a_digest_from_a_file_to_a_raw_signature_file(tmp_path: Path) -> None:
    digest, out = tmp_path / "digest.bin", tmp_path / "sig.der"
    digest.write_bytes(b"\x01" * 32)
    recorder = Recorder(signed())
    done = run(recorder, "keys", "sign", "docs", "--algorithm", "ECDSA_SHA_256", "--digest", "--in", str(digest),
               "--out", str(out))  # fmt: skip
    assert (done.returncode, done.stdout, out.read_bytes()) == (0, b"", b"\x30\x45sig"), done.stderr
    assert body(recorder)["message_type"] == "DIGEST"
    assert base64.b64decode(body(recorder)["message"]) == b"\x01" * 32


def test_sign_json_output_is_the_signature_shape() -> None:
    done = run(Recorder(signed()), "keys", "sign", "docs", "--algorithm", "ECDSA_SHA_256", "--json", stdin=b"m")
    assert json.loads(done.stdout) == {
        "signature": base64.b64encode(b"\x30\x45sig").decode(),
        "key_id": "k1",
        "algorithm": "ECDSA_SHA_256",
    }


def test_verify_exits_0_when_valid_and_1_when_not(tmp_path: Path) -> None:
    verdicts = Recorder(
        httpx.Response(200, json={"valid": True, "key_id": "k1", "algorithm": "ECDSA_SHA_256"}),
        httpx.Response(200, json={"valid": False, "key_id": "k1", "algorithm": "ECDSA_SHA_256"}),
    )
    sig = tmp_path / "sig.der"
    sig.write_bytes(b"\x30\x45sig")
    valid = run(verdicts, "keys", "verify", "docs", "--algorithm", "ECDSA_SHA_256", "--signature-file", str(sig),
                stdin=b"m")  # fmt: skip
    invalid = run(verdicts, "keys", "verify", "docs", "--algorithm", "ECDSA_SHA_256", "--signature",
                  base64.b64encode(b"\x30\x45sig").decode(), stdin=b"m")  # fmt: skip
    assert (valid.returncode, valid.stdout, invalid.returncode, invalid.stdout) == (0, b"valid\n", 1, b"invalid\n")
    assert body(verdicts, 0) == body(verdicts, 1)
    assert body(verdicts, 0)["signature"] == base64.b64encode(b"\x30\x45sig").decode()


def test_verify_usage_errors_exit_2_before_any_request() -> None:
    recorder = Recorder(httpx.Response(200, json={"valid": True}))
    neither = run(recorder, "keys", "verify", "docs", "--algorithm", "ECDSA_SHA_256", stdin=b"m")
    not_b64 = run(recorder, "keys", "verify", "docs", "--algorithm", "ECDSA_SHA_256", "--signature", "no!", stdin=b"m")
    missing = run(recorder, "keys", "verify", "docs", "--algorithm", "ECDSA_SHA_256", "--signature-file", "/nope")
    unknown = run(recorder, "keys", "sign", "docs", "--algorithm", "ECDSA_SHA_1", stdin=b"m")
    assert [r.returncode for r in (neither, not_b64, missing, unknown)] == [2, 2, 2, 2]
    assert b"--signature" in neither.stderr and b"not base64" in not_b64.stderr and b"/nope" in missing.stderr
    assert recorder.requests == []


def test_public_key_prints_base64_der_pem_or_writes_der(tmp_path: Path) -> None:
    answer = {"key_id": "k1", "algorithm": "ECC_NIST_P256", "usage": "SIGN_VERIFY",
              "public_key": base64.b64encode(DER).decode(), "public_key_pem": PEM.decode(),
              "signing_algorithms": ["ECDSA_SHA_256"]}  # fmt: skip
    recorder = Recorder(httpx.Response(200, json=answer))
    out = tmp_path / "public.der"
    as_b64 = run(recorder, "keys", "public-key", "docs")
    as_pem = run(recorder, "keys", "public-key", "docs", "--pem")
    to_file = run(recorder, "keys", "public-key", "docs", "--out", str(out))
    as_json = run(recorder, "keys", "public-key", "docs", "-o", "json")
    assert (as_b64.stdout, as_pem.stdout, to_file.stdout, out.read_bytes()) == (
        base64.b64encode(DER) + b"\n",
        PEM,
        b"",
        DER,
    )
    assert serialization.load_pem_public_key(as_pem.stdout) == EC_KEY.public_key()
    shown = json.loads(as_json.stdout)
    assert (shown["der"], shown["usage"], shown["signing_algorithms"]) == (
        base64.b64encode(DER).decode(),
        "SIGN_VERIFY",
        ["ECDSA_SHA_256"],
    )
    assert recorder.requests[0].url.path == "/v1/keys/docs/public-key"


def test_create_an_rsa_signing_key_and_grant_sign() -> None:
    key = {**KEY_JSON, "algorithm": "RSA_2048", "usage": "SIGN_VERIFY", "signing_algorithms": ["RSASSA_PSS_SHA_256"]}
    recorder = Recorder(httpx.Response(201, json=key))
    done = run(recorder, "keys", "create", "docs", "--algorithm", "RSA_2048", "--usage", "SIGN_VERIFY", "--policy",
               '{"sign": ["billing"]}', "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    sent = body(recorder)
    assert (sent["algorithm"], sent["usage"], sent["policy"]) == ("RSA_2048", "SIGN_VERIFY", {"sign": ["billing"]})
    assert json.loads(done.stdout)["usage"] == "SIGN_VERIFY"


def test_policy_add_grants_an_asymmetric_right() -> None:
    key = {**KEY_JSON, "policy": {"encrypt": ["billing"]}}
    granted = {**KEY_JSON, "policy": {"encrypt": ["billing"], "sign": ["billing"]}}
    recorder = Recorder(httpx.Response(200, json=key, headers={"etag": '"1"'}), httpx.Response(200, json=granted))
    done = run(recorder, "keys", "policy", "add", "cards", "sign", "billing", "--json")
    assert done.returncode == 0, done.stderr
    assert body(recorder, 1)["policy"]["sign"] == ["billing"] and recorder.requests[1].headers["if-match"] == '"1"'


def test_a_refusal_exits_1_naming_the_key() -> None:
    refused = Recorder(error(400, "invalid_request", "ECDSA_SHA_384 is not an algorithm of ECC_NIST_P256"))
    done = run(refused, "keys", "sign", "docs", "--algorithm", "ECDSA_SHA_384", stdin=b"m")
    assert done.returncode == 1 and b"invalid_request" in done.stderr and b"[key 'docs']" in done.stderr
