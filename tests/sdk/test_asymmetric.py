"""Asymmetric keys through the SDK (sync and async) and kmctl against a real service over TLS on
SoftHSM: ``cryptography`` loads every public key the SDK returns and verifies every signature the
HSM made; RSA-OAEP, ECDH and data key pairs agree with ``cryptography``; refusals are the SDK's
exceptions; the asymmetric blocks of ``docs/usage.md`` run as written (twice)."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils
from keymanager_sdk import (
    AsyncKeyManager,
    DecryptionFailed,
    Forbidden,
    InvalidRequest,
    Key,
    KeyManager,
    Policy,
    PublicKey,
)

from tests.e2e.conftest import Server
from tests.e2e.test_server import TOOLS
from tests.sdk.conftest import App, unique
from tests.sdk.test_kmctl import kmctl

ROOT = Path(__file__).resolve().parents[2]
USAGE_DOC = ROOT / "docs" / "usage.md"
SECTION = "### Signatures, public keys and key agreement (asymmetric keys)"
HASHES: dict[str, type[hashes.HashAlgorithm]] = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
SIGNING_SPECS = (
    "RSA_2048",
    "RSA_3072",
    "RSA_4096",
    "ECC_NIST_P256",
    "ECC_NIST_P384",
    "ECC_NIST_P521",
    "ECC_SECG_P256K1",
    "ECC_NIST_EDWARDS25519",
)
CURVES = {"ECC_NIST_P256": ec.SECP256R1, "ECC_NIST_P384": ec.SECP384R1, "ECC_NIST_P521": ec.SECP521R1}
MakeKey = Callable[..., Key]
HSM_MAY_LACK = {"ED25519_PH_SHA_512", "RSAES_OAEP_SHA_256"}
"""Algorithms this HSM (SoftHSM 2.6.1) lacks: the service refuses them by name, never in software."""


@pytest.fixture
def make_asym_key(admin: KeyManager, app_principal: App) -> MakeKey:
    """Create a key whose policy lets the app principal use it every asymmetric way."""

    def make(algorithm: str, usage: str | None = None) -> Key:
        names = (app_principal.name,)
        policy = Policy(
            encrypt=names,
            decrypt=names,
            sign=names,
            verify=names,
            get_public_key=names,
            derive_shared_secret=names,
            generate_data_key_pair=names,
        )
        return admin.create_key(unique("sdk-asym"), algorithm, policy=policy, usage=usage)

    return make


def hash_of(algorithm: str) -> hashes.HashAlgorithm:
    return HASHES[algorithm.rsplit("_", 1)[1]]()


def check(public: PublicKey, algorithm: str, message: bytes, signature: bytes, digest: bool = False) -> None:
    """``cryptography``'s verification of ``signature`` (``InvalidSignature`` when it is not valid)."""
    loaded = public.load()
    chosen = hash_of(algorithm) if not algorithm.startswith("ED25519") else hashes.SHA512()
    signed: bytes | utils.Prehashed = message
    prehashed = utils.Prehashed(chosen) if digest else chosen
    if isinstance(loaded, rsa.RSAPublicKey):
        pad: padding.AsymmetricPadding = padding.PKCS1v15()
        if algorithm.startswith("RSASSA_PSS"):
            pad = padding.PSS(mgf=padding.MGF1(chosen), salt_length=padding.PSS.DIGEST_LENGTH)
        loaded.verify(signature, signed, pad, prehashed)  # type: ignore[arg-type]
    elif isinstance(loaded, ec.EllipticCurvePublicKey):
        loaded.verify(signature, signed, ec.ECDSA(prehashed))  # type: ignore[arg-type]
    elif isinstance(loaded, ed25519.Ed25519PublicKey) and algorithm == "ED25519_SHA_512":
        loaded.verify(signature, message)
    else:
        raise AssertionError(f"no cryptography check for {algorithm} on {type(loaded).__name__}")


@pytest.mark.parametrize("spec", SIGNING_SPECS)
def test_cryptography_loads_the_public_key_and_verifies_every_algorithm(
    spec: str, make_asym_key: MakeKey, app: KeyManager
) -> None:
    key = make_asym_key(spec, "SIGN_VERIFY")
    assert (key.algorithm, key.usage) == (spec, "SIGN_VERIFY") and key.signing_algorithms
    public = app.get_public_key(key.name)
    assert (public.key_id, public.algorithm, public.signing_algorithms) == (key.id, spec, key.signing_algorithms)
    assert serialization.load_pem_public_key(public.pem.encode()) == public.load()
    message = os.urandom(200)
    for algorithm in key.signing_algorithms:
        if algorithm in HSM_MAY_LACK:
            with pytest.raises(InvalidRequest) as refused:  # SoftHSM 2.6.1 has no Ed25519ph: refused by name
                app.sign(key.name, message, algorithm)
            assert f"does not support {spec} {algorithm}" in refused.value.message
            continue
        signed = app.sign(key.name, message, algorithm)
        assert (signed.key_id, signed.algorithm) == (key.id, algorithm)
        check(public, algorithm, message, signed.signature)
        assert app.verify(key.name, message, signed, algorithm) is True
        assert app.verify(key.name, message + b"!", signed, algorithm) is False


@pytest.mark.parametrize(
    ("spec", "algorithm"), [("RSA_2048", "RSASSA_PSS_SHA_384"), ("ECC_NIST_P384", "ECDSA_SHA_384")]
)
def test_a_digest_signed_in_the_hsm_verifies_as_the_message(
    spec: str, algorithm: str, make_asym_key: MakeKey, app: KeyManager
) -> None:
    key = make_asym_key(spec, "SIGN_VERIFY")
    message = os.urandom(10_000)  # over the RAW limit: only its digest can be signed
    hasher = hashes.Hash(hash_of(algorithm))
    hasher.update(message)
    digest = hasher.finalize()
    signed = app.sign(key.name, digest, algorithm, message_type="DIGEST")
    public = app.get_public_key(key.name)
    check(public, algorithm, digest, signed.signature, digest=True)
    check(public, algorithm, message, signed.signature)
    assert app.verify(key.name, digest, signed, algorithm, message_type="DIGEST") is True


def test_openssl_verifies_an_ecdsa_signature_kmctl_wrote(
    server: Server, app_principal: App, make_asym_key: MakeKey, tmp_path: Path
) -> None:
    key, token = make_asym_key("ECC_NIST_P256", "SIGN_VERIFY"), app_principal.token
    (tmp_path / "m.txt").write_bytes(b"ship it")
    signed = kmctl(server, "keys", "sign", key.name, "--algorithm", "ECDSA_SHA_256", "--in", str(tmp_path / "m.txt"),
                   "--out", str(tmp_path / "m.sig"), token=token)  # fmt: skip
    pem = kmctl(server, "keys", "public-key", key.name, "--pem", token=token)
    assert signed.returncode == pem.returncode == 0, signed.stderr + pem.stderr
    (tmp_path / "p.pem").write_bytes(pem.stdout)
    command = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "p.pem", "-rawin", "-in", "m.txt",
               "-sigfile", "m.sig", "-digest", "sha256"]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "Verified Successfully" in done.stdout, done.stdout + done.stderr
    (tmp_path / "m.txt").write_bytes(b"ship it!")
    tampered = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert tampered.returncode != 0


def test_kmctl_signs_stdin_and_verifies_the_base64_signature(
    server: Server, app_principal: App, make_asym_key: MakeKey
) -> None:
    key, token = make_asym_key("ECC_NIST_P256", "SIGN_VERIFY"), app_principal.token
    signed = kmctl(server, "keys", "sign", key.name, "--algorithm", "ECDSA_SHA_256", stdin=b"hello", token=token)
    assert signed.returncode == 0, signed.stderr
    signature = signed.stdout.decode().strip()
    args = ("keys", "verify", key.name, "--algorithm", "ECDSA_SHA_256", "--signature", signature)
    verdicts = [kmctl(server, *args, stdin=message, token=token) for message in (b"hello", b"hullo")]
    assert [(v.returncode, v.stdout) for v in verdicts] == [(0, b"valid\n"), (1, b"invalid\n")]
    assert kmctl(server, *args, stdin=b"hello").returncode == 1  # the admin: not named by the policy
    shown = kmctl(server, "keys", "public-key", key.name, token=token)
    public = serialization.load_der_public_key(base64.b64decode(shown.stdout))
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(base64.b64decode(signature), b"hello", ec.ECDSA(hashes.SHA256()))
    wrong = kmctl(server, "keys", "sign", key.name, "--algorithm", "ECDSA_SHA_512", stdin=b"hello", token=token)
    assert wrong.returncode == 1 and b"invalid_request" in wrong.stderr


@pytest.mark.parametrize("algorithm", ["RSAES_OAEP_SHA_1", "RSAES_OAEP_SHA_256"])
def test_rsa_oaep_round_trips_and_every_bad_ciphertext_is_one_error(
    algorithm: str, make_asym_key: MakeKey, admin: KeyManager, app: KeyManager
) -> None:
    key = make_asym_key("RSA_2048", "ENCRYPT_DECRYPT")
    assert algorithm in key.encryption_algorithms
    if algorithm in HSM_MAY_LACK:  # SoftHSM's OAEP has no SHA-256: refused by name, never padded in software
        with pytest.raises(InvalidRequest) as refused:
            app.encrypt(key.name, b"x", algorithm=algorithm)
        assert f"does not support RSA_2048 {algorithm}" in refused.value.message
        return
    sealed = app.encrypt(key.name, b"for your eyes", algorithm=algorithm)
    raw = base64.b64decode(sealed)
    assert len(raw) == 256 and app.decrypt(sealed, key=key.name, algorithm=algorithm) == b"for your eyes"
    public = app.get_public_key(key.name).load()
    assert isinstance(public, rsa.RSAPublicKey)
    chosen = hashes.SHA1() if algorithm.endswith("SHA_1") else hashes.SHA256()  # noqa: S303 - AWS's RSAES_OAEP_SHA_1
    local = public.encrypt(b"made offline", padding.OAEP(mgf=padding.MGF1(chosen), algorithm=chosen, label=None))
    assert app.decrypt(local, key=key.name, algorithm=algorithm) == b"made offline"
    failures = []
    for bad in (raw[:-1], bytes([raw[0] ^ 1]) + raw[1:], b"\x00" * 256):
        with pytest.raises(DecryptionFailed) as failed:
            app.decrypt(bad, key=key.name, algorithm=algorithm)
        failures.append((failed.value.status, failed.value.code, failed.value.message))
    assert len(set(failures)) == 1


def test_ecdh_agrees_with_cryptography_and_refuses_another_curve(make_asym_key: MakeKey, app: KeyManager) -> None:
    key = make_asym_key("ECC_NIST_P256", "KEY_AGREEMENT")
    assert key.key_agreement_algorithms == ("ECDH",) and key.signing_algorithms == ()
    ours = app.get_public_key(key.name).load()
    assert isinstance(ours, ec.EllipticCurvePublicKey)
    peer = ec.generate_private_key(ec.SECP256R1())
    expected = peer.exchange(ec.ECDH(), ours)
    der = peer.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    for given in (peer.public_key(), der):
        derived = app.derive_shared_secret(key.name, given)
        assert (derived.secret, derived.key_id, derived.algorithm) == (expected, key.id, "ECDH")
    with pytest.raises(InvalidRequest):
        app.derive_shared_secret(key.name, ec.generate_private_key(ec.SECP384R1()).public_key())


@pytest.mark.parametrize("pair_spec", ["RSA_2048", "ECC_NIST_P256"])
def test_a_data_key_pair_loads_and_its_private_key_decrypts_back(
    pair_spec: str, make_asym_key: MakeKey, app: KeyManager
) -> None:
    key = make_asym_key("AES_256_GCM")
    pair = app.generate_data_key_pair(key.name, pair_spec, {"app": "sdk"})
    private = pair.load_private_key()
    assert isinstance(private, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey)
    assert private.public_key() == pair.load_public_key()
    assert app.decrypt(pair.private_key_ciphertext, {"app": "sdk"}) == pair.private_key_plaintext
    bare = app.generate_data_key_pair(key.name, pair_spec, include_plaintext=False)
    assert bare.private_key_plaintext is None and bare.public_key != pair.public_key
    with pytest.raises(DecryptionFailed):
        app.decrypt(pair.private_key_ciphertext, {"app": "other"})


def test_misuse_is_refused_as_invalid_request(make_asym_key: MakeKey, app: KeyManager) -> None:
    signer = make_asym_key("ECC_NIST_P256", "SIGN_VERIFY")
    agreement = make_asym_key("ECC_NIST_P256", "KEY_AGREEMENT")
    symmetric = make_asym_key("AES_256_GCM")
    for refused in (
        lambda: app.sign(signer.name, b"m", "ECDSA_SHA_384"),  # another spec's algorithm
        lambda: app.sign(signer.name, b"m" * 4097, "ECDSA_SHA_256"),  # RAW over 4,096 bytes
        lambda: app.sign(signer.name, b"d" * 31, "ECDSA_SHA_256", message_type="DIGEST"),  # wrong digest length
        lambda: app.sign(agreement.name, b"m", "ECDSA_SHA_256"),  # wrong usage
        lambda: app.derive_shared_secret(signer.name, ec.generate_private_key(ec.SECP256R1()).public_key()),
        lambda: app.get_public_key(symmetric.name),
    ):
        with pytest.raises(InvalidRequest):
            refused()
    assert app.sign(signer.name, b"m" * 4096, "ECDSA_SHA_256").signature


def test_a_principal_the_policy_does_not_name_is_forbidden(
    server: Server, admin: KeyManager, make_asym_key: MakeKey
) -> None:
    key = make_asym_key("ECC_NIST_P256", "SIGN_VERIFY")
    stranger = admin.create_principal(unique("sdk-stranger"), "app")
    with KeyManager(server.url, token=stranger.token, ca=str(server.ca)) as other:
        with pytest.raises(Forbidden):
            other.sign(key.name, b"m", "ECDSA_SHA_256")
        with pytest.raises(Forbidden):
            other.get_public_key(key.name)


def test_the_async_client_signs_verifies_and_derives(
    server: Server, app_principal: App, make_asym_key: MakeKey
) -> None:
    signer = make_asym_key("RSA_2048", "SIGN_VERIFY")
    agreement = make_asym_key("ECC_NIST_P384", "KEY_AGREEMENT")
    peer = ec.generate_private_key(ec.SECP384R1())

    async def main() -> tuple[PublicKey, bytes, bool, bytes, PublicKey]:
        async with AsyncKeyManager(server.url, token=app_principal.token, ca=str(server.ca)) as km:
            public = await km.get_public_key(signer.name)
            signed = await km.sign(signer.name, b"async", "RSASSA_PKCS1_V1_5_SHA_256")
            valid = await km.verify(signer.name, b"async", signed, "RSASSA_PKCS1_V1_5_SHA_256")
            secret = (await km.derive_shared_secret(agreement.name, peer.public_key())).secret
            return public, signed.signature, valid, secret, await km.get_public_key(agreement.name)

    public, signature, valid, secret, agreeing = asyncio.run(main())
    check(public, "RSASSA_PKCS1_V1_5_SHA_256", b"async", signature)
    with pytest.raises(InvalidSignature):
        check(public, "RSASSA_PKCS1_V1_5_SHA_256", b"other", signature)
    agreeing_key = agreeing.load()
    assert isinstance(agreeing_key, ec.EllipticCurvePublicKey)
    assert valid is True and secret == peer.exchange(ec.ECDH(), agreeing_key)


def usage_blocks() -> tuple[str, str]:
    """The bash and the Python block of docs/usage.md's section on asymmetric keys."""
    section = USAGE_DOC.read_text().split(SECTION, 1)[1].split("\n### ", 1)[0]
    bash = re.findall(r"^```bash\n(.*?)^```$", section, flags=re.M | re.S)
    python = re.findall(r"^```python\n(.*?)^```$", section, flags=re.M | re.S)
    assert len(bash) == len(python) == 1
    return bash[0], python[0]


def test_the_usage_doc_blocks_run_as_written_twice(server: Server) -> None:
    bash, python = usage_blocks()
    env = {k: v for k, v in server.env.items() if not k.startswith(("KM_", "KMCTL_"))}
    env.update(KM_URL=server.url, KM_CA=str(server.ca), KM_TOKEN=server.admin_token, **TOOLS)
    env["KMCTL_CONFIG"] = "/nonexistent/kmctl.toml"
    checkout = server.var_dir.parent
    for _ in range(2):
        shell = subprocess.run(["bash", "-euo", "pipefail", "-c", bash], cwd=checkout, env=env, capture_output=True,
                               text=True, timeout=180, check=False)  # fmt: skip
        assert shell.returncode == 0, shell.stdout + shell.stderr
        lines = shell.stdout.splitlines()
        assert lines[0] == "SIGN_VERIFY" and lines.count("valid") == 1 and "invalid" in lines
        assert "another message: exit 1" in lines and lines.count("Signature Verified Successfully") == 2
        program = subprocess.run([sys.executable, "-c", python], cwd=checkout, env=env, capture_output=True,
                                 text=True, timeout=180, check=False)  # fmt: skip
        assert (program.returncode, program.stdout) == (0, "asymmetric keys: ok\n"), program.stderr
