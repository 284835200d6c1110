"""Asymmetric keys through a real server over TLS, proved with other people's code.

``cryptography`` loads every public key the server exports and verifies every signature the HSM
makes, for every spec and signing algorithm the token supports (``GET /v1/health?detail=true``);
``openssl pkeyutl -verify`` verifies an RSA and an ECDSA signature with the exported key; OAEP
ciphertexts made by ``cryptography`` open in the HSM; ECDH secrets match ``cryptography``'s; a
data key pair's private key decrypts to a PKCS#8 key that matches its public key. Algorithms the
token lacks are refused by name (400), never worked around in software. Every bad input of
issue 22 gets its 4xx.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from keymanager.domain.credentials import new_id
from keymanager.domain.key_specs import (
    ASYMMETRIC,
    DATA_KEY_PAIR_SPECS,
    SIGNS_RAW_ONLY,
    SPECS,
    KeyUsage,
    SigningAlgorithm,
    digest_bytes,
)
from tests.domain.test_peer_keys import EXPLICIT_P256, NAMED_PRIME192V2
from tests.e2e.conftest import Server

HASHES = {32: hashes.SHA256(), 48: hashes.SHA384(), 64: hashes.SHA512()}
MESSAGE = b"issue 22: signed by the HSM, checked by someone else"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


@pytest.fixture(scope="module")
def app(server: Server) -> Iterator[tuple[httpx.Client, httpx.Client, str]]:
    """(admin client, app client, app principal's name) on the shared server."""
    name = f"asym-{new_id()[:8]}"
    with server.client(server.admin_token) as admin:
        made = admin.post("/v1/principals", json={"name": name, "role": "app"})
        assert made.status_code == 201, made.text
        with server.client(made.json()["token"]) as client:
            yield admin, client, name


@pytest.fixture(scope="module")
def supported(server: Server) -> set[str]:
    return set(server.supported())


def _rights(name: str) -> dict[str, list[str]]:
    rights = ("sign", "verify", "get_public_key", "derive_shared_secret", "encrypt", "decrypt")
    return {right: [name] for right in (*rights, "generate_data_key_pair")}


def _create(admin: httpx.Client, name: str, algorithm: str, usage: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"name": f"k-{new_id()[:12]}", "algorithm": algorithm, "policy": _rights(name)}
    if usage is not None:
        body["usage"] = usage
    return admin.post("/v1/keys", json=body)


def _key(app: tuple[httpx.Client, httpx.Client, str], algorithm: str, usage: str | None = None) -> dict[str, Any]:
    admin, _, name = app
    made = _create(admin, name, algorithm, usage)
    assert made.status_code == 201, made.text
    key: dict[str, Any] = made.json()
    return key


def _public_key(client: httpx.Client, key: dict[str, Any]) -> Any:
    answer = client.get(f"/v1/keys/{key['id']}/public-key")
    assert answer.status_code == 200, answer.text
    shown = answer.json()
    loaded = serialization.load_der_public_key(unb64(shown["public_key"]))
    assert serialization.load_pem_public_key(shown["public_key_pem"].encode()) == loaded
    return loaded


def _verify_with_cryptography(public: Any, algorithm: SigningAlgorithm, signature: bytes) -> None:
    if isinstance(public, ed25519.Ed25519PublicKey):
        public.verify(signature, MESSAGE)
        return
    chosen = HASHES[digest_bytes(algorithm)]
    if isinstance(public, ec.EllipticCurvePublicKey):
        public.verify(signature, MESSAGE, ec.ECDSA(chosen))  # DER, as AWS returns it
    elif algorithm.value.startswith("RSASSA_PSS"):
        public.verify(signature, MESSAGE, padding.PSS(padding.MGF1(chosen), chosen.digest_size), chosen)
    else:
        public.verify(signature, MESSAGE, padding.PKCS1v15(), chosen)


SIGNING_CASES = [
    (spec, algorithm)
    for spec in ASYMMETRIC
    if SPECS[spec].allowed(KeyUsage.SIGN_VERIFY)
    for algorithm in SPECS[spec].algorithms(KeyUsage.SIGN_VERIFY)
]


@pytest.mark.parametrize(("spec", "algorithm"), SIGNING_CASES, ids=[f"{s}-{a}" for s, a in SIGNING_CASES])
def test_cryptography_verifies_every_signature_the_hsm_makes(
    app: tuple[httpx.Client, httpx.Client, str], supported: set[str], spec: str, algorithm: str
) -> None:
    _, client, _ = app
    if f"{spec} SIGN_VERIFY" not in supported:
        refused = _create(app[0], app[2], spec, "SIGN_VERIFY")
        assert refused.status_code == 400 and spec in refused.json()["error"]["message"]
        return
    key = _key(app, spec, "SIGN_VERIFY")
    assert algorithm in key["signing_algorithms"] and key["usage"] == "SIGN_VERIFY"
    public = _public_key(client, key)
    signing = SigningAlgorithm(algorithm)
    signed = client.post(f"/v1/keys/{key['id']}/sign", json={"message": b64(MESSAGE), "algorithm": algorithm})
    if f"{spec} {algorithm}" not in supported:
        assert signed.status_code == 400, signed.text
        assert algorithm in signed.json()["error"]["message"] and "CKM_" in signed.json()["error"]["message"]
        return
    assert signed.status_code == 200, signed.text
    signature = unb64(signed.json()["signature"])
    _verify_with_cryptography(public, signing, signature)
    body = {"message": b64(MESSAGE), "signature": b64(signature), "algorithm": algorithm}
    assert client.post(f"/v1/keys/{key['id']}/verify", json=body).json()["valid"] is True
    tampered = {**body, "message": b64(MESSAGE + b"!")}
    assert client.post(f"/v1/keys/{key['id']}/verify", json=tampered).json()["valid"] is False
    if signing not in SIGNS_RAW_ONLY:  # the same signature scheme over a digest the caller computed
        digest = hashlib.new(HASHES[digest_bytes(signing)].name, MESSAGE).digest()
        by_digest = {"message": b64(digest), "message_type": "DIGEST", "algorithm": algorithm}
        again = client.post(f"/v1/keys/{key['id']}/sign", json=by_digest)
        assert again.status_code == 200, again.text
        _verify_with_cryptography(public, signing, unb64(again.json()["signature"]))


@pytest.mark.parametrize("spec", ["RSA_2048", "ECC_NIST_P256"])
def test_openssl_verifies_a_signature_with_the_exported_key(
    app: tuple[httpx.Client, httpx.Client, str], tmp_path: Path, spec: str
) -> None:
    _, client, _ = app
    key = _key(app, spec, "SIGN_VERIFY")
    pem = client.get(f"/v1/keys/{key['id']}/public-key").json()["public_key_pem"]
    algorithm = "RSASSA_PKCS1_V1_5_SHA_256" if spec.startswith("RSA") else "ECDSA_SHA_256"
    signed = client.post(f"/v1/keys/{key['id']}/sign", json={"message": b64(MESSAGE), "algorithm": algorithm})
    assert signed.status_code == 200, signed.text
    (tmp_path / "key.pem").write_text(pem)
    (tmp_path / "message").write_bytes(MESSAGE)
    (tmp_path / "signature").write_bytes(unb64(signed.json()["signature"]))
    command = ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "key.pem", "-rawin", "-in", "message"]
    command += ["-sigfile", "signature", "-digest", "sha256"]
    checked = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and "Signature Verified Successfully" in checked.stdout, checked.stderr
    (tmp_path / "message").write_bytes(MESSAGE + b"!")
    tampered = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert tampered.returncode != 0


@pytest.mark.parametrize("algorithm", ["RSAES_OAEP_SHA_1", "RSAES_OAEP_SHA_256"])
def test_oaep_ciphertexts_of_cryptography_open_in_the_hsm(
    app: tuple[httpx.Client, httpx.Client, str], supported: set[str], algorithm: str
) -> None:
    _, client, _ = app
    key = _key(app, "RSA_2048", "ENCRYPT_DECRYPT")
    assert key["encryption_algorithms"] == ["RSAES_OAEP_SHA_1", "RSAES_OAEP_SHA_256"]
    public: rsa.RSAPublicKey = _public_key(client, key)
    chosen = hashes.SHA1() if algorithm.endswith("SHA_1") else hashes.SHA256()  # noqa: S303 (OAEP's, as AWS)
    sealed = public.encrypt(b"card 4111", padding.OAEP(padding.MGF1(chosen), chosen, None))
    opened = client.post(f"/v1/keys/{key['id']}/decrypt", json={"ciphertext": b64(sealed), "algorithm": algorithm})
    if f"RSA_2048 {algorithm}" not in supported:  # SoftHSM 2.6.1: OAEP with SHA-256 is ArgumentsBad
        assert opened.status_code == 400 and "CKM_RSA_PKCS_OAEP" in opened.json()["error"]["message"]
        assert (
            client.post(
                f"/v1/keys/{key['id']}/encrypt", json={"plaintext": b64(b"x"), "algorithm": algorithm}
            ).status_code
            == 400
        )
        return
    assert opened.status_code == 200, opened.text
    assert unb64(opened.json()["plaintext"]) == b"card 4111"
    ours = client.post(f"/v1/keys/{key['id']}/encrypt", json={"plaintext": b64(b"round"), "algorithm": algorithm})
    assert ours.status_code == 200 and ours.json()["algorithm"] == algorithm
    back = client.post(
        f"/v1/keys/{key['id']}/decrypt", json={"ciphertext": ours.json()["ciphertext"], "algorithm": algorithm}
    )
    assert unb64(back.json()["plaintext"]) == b"round"


def test_every_bad_oaep_ciphertext_is_the_one_decryption_failed(app: tuple[httpx.Client, httpx.Client, str]) -> None:
    _, client, _ = app
    key = _key(app, "RSA_2048", "ENCRYPT_DECRYPT")
    good = client.post(f"/v1/keys/{key['id']}/encrypt", json={"plaintext": b64(b"x"), "algorithm": "RSAES_OAEP_SHA_1"})
    sealed = unb64(good.json()["ciphertext"])
    other = _key(app, "RSA_2048", "ENCRYPT_DECRYPT")
    theirs = client.post(
        f"/v1/keys/{other['id']}/encrypt", json={"plaintext": b64(b"x"), "algorithm": "RSAES_OAEP_SHA_1"}
    )
    bad = [
        b64(sealed[:-1]),
        b64(sealed + b"\x00"),
        b64(bytes([sealed[0] ^ 1]) + sealed[1:]),
        b64(sealed[:-1] + bytes([sealed[-1] ^ 0x80])),
        theirs.json()["ciphertext"],
        "not base64!",
        "",
    ]
    answers = set()
    for ciphertext in bad:
        answer = client.post(
            f"/v1/keys/{key['id']}/decrypt", json={"ciphertext": ciphertext, "algorithm": "RSAES_OAEP_SHA_1"}
        )
        body = answer.json()
        answers.add((answer.status_code, body["error"]["code"], body["error"]["message"]))
    assert answers == {(400, "decryption_failed", "decryption failed")}


@pytest.mark.parametrize("spec", ["ECC_NIST_P256", "ECC_NIST_P384", "ECC_NIST_P521"])
def test_ecdh_in_the_hsm_matches_cryptography(app: tuple[httpx.Client, httpx.Client, str], spec: str) -> None:
    _, client, _ = app
    key = _key(app, spec, "KEY_AGREEMENT")
    assert key["key_agreement_algorithms"] == ["ECDH"] and "signing_algorithms" not in key
    ours = _public_key(client, key)
    peer = ec.generate_private_key(ours.curve)
    peer_spki = peer.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    derived = client.post(f"/v1/keys/{key['id']}/derive-shared-secret", json={"public_key": b64(peer_spki)})
    assert derived.status_code == 200, derived.text
    assert unb64(derived.json()["shared_secret"]) == peer.exchange(ec.ECDH(), ours)


@pytest.mark.parametrize("pair_spec", DATA_KEY_PAIR_SPECS)
def test_a_data_key_pair_decrypts_to_its_pkcs8_private_key(
    app: tuple[httpx.Client, httpx.Client, str], pair_spec: str
) -> None:
    _, client, _ = app
    wrapping = _key(app, "AES_256_GCM")
    context = {"purpose": "issue-22"}
    body = {"key_pair_spec": pair_spec, "context": context}
    made = client.post(f"/v1/keys/{wrapping['id']}/datakey-pair", json=body)
    assert made.status_code == 200, made.text
    answer = made.json()
    assert answer["private_key_ciphertext"].startswith("km:1:")
    opened = client.post(
        f"/v1/keys/{wrapping['id']}/decrypt", json={"ciphertext": answer["private_key_ciphertext"], "context": context}
    )
    assert opened.status_code == 200, opened.text
    private = serialization.load_der_private_key(unb64(opened.json()["plaintext"]), password=None)
    assert unb64(opened.json()["plaintext"]) == unb64(answer["private_key_plaintext"])
    public_der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert public_der == unb64(answer["public_key"])
    without = client.post(f"/v1/keys/{wrapping['id']}/datakey-pair", json={**body, "include_plaintext": False})
    assert without.status_code == 200 and "private_key_plaintext" not in without.json()


def _error(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    error: dict[str, str] = answer.json()["error"]
    assert error["code"] and error["message"]
    return error["message"]


def test_every_bad_input_of_the_issue_gets_its_4xx(server: Server, app: tuple[httpx.Client, httpx.Client, str]) -> None:
    admin, client, _ = app
    rsa_key = _key(app, "RSA_2048", "SIGN_VERIFY")
    p256 = _key(app, "ECC_NIST_P256")
    agreeing = _key(app, "ECC_NIST_P256", "KEY_AGREEMENT")
    sign = f"/v1/keys/{rsa_key['id']}/sign"
    pss = "RSASSA_PSS_SHA_256"
    assert "32 bytes" in _error(
        client.post(sign, json={"message": b64(b"x" * 31), "message_type": "DIGEST", "algorithm": pss}), 400
    )
    assert "4096" in _error(client.post(sign, json={"message": b64(b"x" * 4097), "algorithm": pss}), 400)
    assert client.post(sign, json={"message": b64(b"x" * 4096), "algorithm": pss}).status_code == 200
    assert "ECDSA_SHA_256" in _error(client.post(sign, json={"message": b64(b"x"), "algorithm": "ECDSA_SHA_256"}), 400)
    assert "ECDSA_SHA_384" in _error(
        client.post(f"/v1/keys/{p256['id']}/sign", json={"message": b64(b"x"), "algorithm": "ECDSA_SHA_384"}), 400
    )
    assert "usage" in _error(
        client.post(f"/v1/keys/{agreeing['id']}/sign", json={"message": b64(b"x"), "algorithm": "ECDSA_SHA_256"}), 400
    )
    assert "usage" in _error(
        client.post(f"/v1/keys/{p256['id']}/derive-shared-secret", json={"public_key": b64(b"x")}), 400
    )
    p384_peer = ec.generate_private_key(ec.SECP384R1()).public_key()
    other_curve = p384_peer.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    derive = f"/v1/keys/{agreeing['id']}/derive-shared-secret"
    assert "secp256r1" in _error(client.post(derive, json={"public_key": b64(other_curve)}), 400)
    assert "SubjectPublicKeyInfo" in _error(client.post(derive, json={"public_key": b64(b"not a key")}), 400)
    for peer, named in ((EXPLICIT_P256, "explicit parameters"), (NAMED_PRIME192V2, "1.2.840.10045.3.1.2")):
        refusal = _error(client.post(derive, json={"public_key": b64(peer)}), 400)  # 200 and 500 before
        assert named in refusal and "secp256r1" in refusal, refusal
    _error(client.post(sign, json={"message": "not base64!", "algorithm": pss}), 400)
    verify = f"/v1/keys/{rsa_key['id']}/verify"
    assert (
        client.post(verify, json={"message": b64(b"x"), "signature": b64(b"\x00" * 3), "algorithm": pss}).json()[
            "valid"
        ]
        is False
    )
    _error(client.post(verify, json={"message": b64(b"x"), "signature": "%%%", "algorithm": pss}), 400)
    assert "usage" in _error(client.post(f"/v1/keys/{rsa_key['id']}/encrypt", json={"plaintext": b64(b"x")}), 400)
    oaep_key = _key(app, "RSA_2048", "ENCRYPT_DECRYPT")
    encrypt = f"/v1/keys/{oaep_key['id']}/encrypt"
    assert "RSAES_OAEP" in _error(client.post(encrypt, json={"plaintext": b64(b"x")}), 400)
    too_long = {"plaintext": b64(b"x" * 215), "algorithm": "RSAES_OAEP_SHA_1"}
    assert "214 bytes" in _error(client.post(encrypt, json=too_long), 400)
    signing_alg = {"plaintext": b64(b"x"), "algorithm": "SYMMETRIC_DEFAULT"}
    assert "RSAES_OAEP_SHA_1" in _error(client.post(encrypt, json=signing_alg), 400)
    assert "usage" in _error(admin.post("/v1/keys", json={"name": f"k-{new_id()[:12]}", "algorithm": "RSA_2048"}), 400)
    wrong_usage = {"name": f"k-{new_id()[:12]}", "algorithm": "ECC_SECG_P256K1", "usage": "KEY_AGREEMENT"}
    assert "KEY_AGREEMENT" in _error(admin.post("/v1/keys", json=wrong_usage), 400)
    assert "RSA_2048" in _error(admin.post(f"/v1/keys/{rsa_key['id']}/rotate"), 400)
    assert "asymmetric" in _error(client.get(f"/v1/keys/{_key(app, 'AES_256_GCM')['id']}/public-key"), 400)
    stranger = admin.post("/v1/principals", json={"name": f"s-{new_id()[:8]}", "role": "app"}).json()["token"]
    with server.client(stranger) as other:
        _error(other.post(sign, json={"message": b64(b"x"), "algorithm": pss}), 403)
        _error(other.get(f"/v1/keys/{rsa_key['id']}/public-key"), 403)
