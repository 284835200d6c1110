"""The asymmetric-key calls (``_asymmetric``, RSA-OAEP in ``_core``) against the native routes'
fixed shapes, with ``httpx.MockTransport`` (no sockets). The answers carry real keys and
signatures made here with ``cryptography``, so what the SDK hands back must load and verify."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import keymanager_sdk as km
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from tests.sdk.test_core import KEY_JSON, Recorder, client, error

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def spki(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def public_key_answer(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, algorithm: str, **lists: Any) -> Any:
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    body = {"key_id": "k1", "algorithm": algorithm, "usage": "SIGN_VERIFY", "public_key": b64(spki(key))}
    return httpx.Response(200, json={**body, "public_key_pem": pem.decode(), **lists})


def sent(recorder: Recorder, index: int = 0) -> Any:
    return json.loads(recorder.requests[index].content)


def test_get_public_key_loads_in_cryptography_and_verifies_a_signature() -> None:
    recorder = Recorder(public_key_answer(RSA_KEY, "RSA_2048", signing_algorithms=["RSASSA_PSS_SHA_256"]))
    with client(recorder) as c:
        public = c.get_public_key("signer")
    assert (recorder.requests[0].method, recorder.requests[0].url.path) == ("GET", "/v1/keys/signer/public-key")
    assert (public.key_id, public.algorithm, public.usage) == ("k1", "RSA_2048", "SIGN_VERIFY")
    assert public.der == spki(RSA_KEY) and public.pem.startswith("-----BEGIN PUBLIC KEY-----")
    assert public.signing_algorithms == ("RSASSA_PSS_SHA_256",) and public.encryption_algorithms == ()
    loaded = public.load()
    assert isinstance(loaded, rsa.RSAPublicKey)
    loaded.verify(RSA_KEY.sign(b"doc", PSS, hashes.SHA256()), b"doc", PSS, hashes.SHA256())
    assert serialization.load_pem_public_key(public.pem.encode()).public_numbers() == loaded.public_numbers()


def test_a_public_key_answer_without_pem_gets_one_from_the_der() -> None:
    answer = {"key_id": "k1", "algorithm": "ECC_NIST_P256", "usage": "KEY_AGREEMENT", "public_key": b64(spki(EC_KEY))}
    with client(Recorder(httpx.Response(200, json=answer))) as c:
        public = c.get_public_key("k1")
    assert serialization.load_pem_public_key(public.pem.encode()) == public.load()


def test_a_public_key_answer_that_is_not_base64_is_an_invalid_response() -> None:
    answer = {"key_id": "k1", "algorithm": "RSA_2048", "usage": "SIGN_VERIFY", "public_key": "not base64!"}
    with client(Recorder(httpx.Response(200, json=answer))) as c, pytest.raises(km.APIError) as raised:
        c.get_public_key("k1")
    assert raised.value.code == "invalid_response"


def test_sign_sends_base64_message_type_and_algorithm_and_returns_the_signature_bytes() -> None:
    signature = EC_KEY.sign(b"hello", ec.ECDSA(hashes.SHA256()))
    answer = {"signature": b64(signature), "key_id": "k1", "algorithm": "ECDSA_SHA_256"}
    recorder = Recorder(httpx.Response(200, json=answer))
    with client(recorder) as c:
        signed = c.sign("signer", "hello", "ECDSA_SHA_256")
    assert recorder.requests[0].url.path == "/v1/keys/signer/sign"
    assert sent(recorder) == {"message": b64(b"hello"), "message_type": "RAW", "algorithm": "ECDSA_SHA_256"}
    assert signed == km.Signature(signature, "k1", "ECDSA_SHA_256")
    EC_KEY.public_key().verify(signed.signature, b"hello", ec.ECDSA(hashes.SHA256()))


def test_sign_a_digest() -> None:
    digest = hashes.Hash(hashes.SHA256())
    digest.update(b"hello")
    answer = {"signature": b64(b"s"), "key_id": "k1", "algorithm": "RSASSA_PSS_SHA_256"}
    recorder = Recorder(httpx.Response(200, json=answer))
    with client(recorder) as c:
        c.sign("signer", digest.finalize(), "RSASSA_PSS_SHA_256", message_type="DIGEST")
    assert sent(recorder)["message_type"] == "DIGEST" and len(base64.b64decode(sent(recorder)["message"])) == 32


@pytest.mark.parametrize("valid", [True, False])
def test_verify_sends_the_signature_and_returns_the_verdict(valid: bool) -> None:
    recorder = Recorder(httpx.Response(200, json={"valid": valid, "key_id": "k1", "algorithm": "ECDSA_SHA_256"}))
    with client(recorder) as c:
        signed = km.Signature(b"\x30\x06sig", "k1", "ECDSA_SHA_256")
        assert c.verify("signer", b"hello", signed, "ECDSA_SHA_256") is valid
        assert c.verify("signer", b"hello", b"\x30\x06sig", "ECDSA_SHA_256") is valid
    assert sent(recorder, 0) == sent(recorder, 1)
    assert sent(recorder, 0)["signature"] == b64(b"\x30\x06sig") and recorder.requests[0].url.path.endswith("/verify")


def test_verify_refuses_a_str_signature_before_sending() -> None:
    recorder = Recorder(httpx.Response(200, json={"valid": True}))
    with client(recorder) as c, pytest.raises(TypeError, match="base64-decode"):
        c.verify("signer", b"m", "MEUCIQ==", "ECDSA_SHA_256")  # type: ignore[arg-type]
    assert recorder.requests == []


def test_a_verdict_that_is_not_a_boolean_is_an_invalid_response() -> None:
    with client(Recorder(httpx.Response(200, json={"valid": "false"}))) as c, pytest.raises(km.APIError) as raised:
        c.verify("signer", b"m", b"s", "ECDSA_SHA_256")
    assert raised.value.code == "invalid_response"


def test_rsa_oaep_encrypt_and_decrypt_name_the_algorithm() -> None:
    oaep = RSA_KEY.public_key().encrypt(b"secret", padding.OAEP(padding.MGF1(hashes.SHA256()), hashes.SHA256(), None))
    recorder = Recorder(
        httpx.Response(200, json={"ciphertext": b64(oaep), "key_id": "k1", "algorithm": "RSAES_OAEP_SHA_256"}),
        httpx.Response(200, json={"plaintext": b64(b"secret")}),
    )
    with client(recorder) as c:
        sealed = c.encrypt("rsa", b"secret", algorithm="RSAES_OAEP_SHA_256")
        assert (sealed.key_id, sealed.key_version, base64.b64decode(sealed)) == ("k1", 1, oaep)
        assert c.decrypt(sealed, key="rsa", algorithm="RSAES_OAEP_SHA_256") == b"secret"
        c.decrypt(oaep, key="rsa", algorithm="RSAES_OAEP_SHA_256")
    assert sent(recorder, 0) == {"plaintext": b64(b"secret"), "algorithm": "RSAES_OAEP_SHA_256"}
    assert recorder.requests[1].url.path == "/v1/keys/rsa/decrypt"
    assert sent(recorder, 1) == sent(recorder, 2) == {"ciphertext": b64(oaep), "algorithm": "RSAES_OAEP_SHA_256"}


def test_oaep_decrypt_without_the_key_is_refused_before_sending() -> None:
    recorder = Recorder(httpx.Response(200, json={"plaintext": ""}))
    with client(recorder) as c, pytest.raises(ValueError, match="needs key="):
        c.decrypt("AAAA", algorithm="RSAES_OAEP_SHA_1")
    assert recorder.requests == []


def test_symmetric_encrypt_sends_no_algorithm() -> None:
    recorder = Recorder(httpx.Response(200, json={"ciphertext": "km:1:x:1:AA", "key_id": "x", "key_version": 1}))
    with client(recorder) as c:
        c.encrypt("cards", b"4111")
        with pytest.raises(TypeError):
            c.decrypt(b"km:1:x:1:AA")  # type: ignore[arg-type]  # bytes only with an OAEP algorithm
    assert "algorithm" not in sent(recorder)


def test_derive_shared_secret_takes_a_cryptography_key_a_public_key_der_or_pem() -> None:
    peer = ec.generate_private_key(ec.SECP256R1())
    secret = EC_KEY.exchange(ec.ECDH(), peer.public_key())
    answer = {"shared_secret": b64(secret), "key_id": "k1", "algorithm": "ECDH"}
    recorder = Recorder(httpx.Response(200, json=answer))
    pem = peer.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    as_public_key = km.PublicKey("p", "ECC_NIST_P256", "KEY_AGREEMENT", spki(peer), pem.decode())
    with client(recorder) as c:
        for given in (peer.public_key(), spki(peer), pem, as_public_key):
            derived = c.derive_shared_secret("agree", given)
            assert derived.secret == secret and derived.algorithm == "ECDH" and b64(secret) not in repr(derived)
    assert recorder.requests[0].url.path == "/v1/keys/agree/derive-shared-secret"
    assert all(sent(recorder, i) == {"public_key": b64(spki(peer)), "algorithm": "ECDH"} for i in range(4))


def test_derive_refuses_a_str_peer_key() -> None:
    with client(Recorder(httpx.Response(200, json={}))) as c, pytest.raises(TypeError, match="public_key must be"):
        c.derive_shared_secret("agree", "MFkwEwYH")  # type: ignore[arg-type]


def test_data_key_pair_loads_and_hides_the_private_key() -> None:
    pkcs8 = EC_KEY.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    answer = {
        "key_id": "k1",
        "key_pair_spec": "ECC_NIST_P256",
        "public_key": b64(spki(EC_KEY)),
        "private_key_ciphertext": "km:1:k1:1:AAAA",
        "private_key_plaintext": b64(pkcs8),
    }
    without = {k: v for k, v in answer.items() if k != "private_key_plaintext"}
    recorder = Recorder(httpx.Response(200, json=answer), httpx.Response(200, json=without))
    with client(recorder) as c:
        pair = c.generate_data_key_pair("wrapping", "ECC_NIST_P256", {"app": "x"})
        bare = c.generate_data_key_pair("wrapping", "ECC_NIST_P256", include_plaintext=False)
    body = {"key_pair_spec": "ECC_NIST_P256", "include_plaintext": True, "context": {"app": "x"}}
    assert recorder.requests[0].url.path == "/v1/keys/wrapping/datakey-pair" and sent(recorder, 0) == body
    assert sent(recorder, 1)["include_plaintext"] is False
    private = pair.load_private_key()
    assert isinstance(private, ec.EllipticCurvePrivateKey) and private.private_numbers() == EC_KEY.private_numbers()
    assert pair.load_public_key() == EC_KEY.public_key() and b64(pkcs8) not in repr(pair)
    assert bare.private_key_plaintext is None and bare.private_key_ciphertext == "km:1:k1:1:AAAA"
    with pytest.raises(ValueError, match="without its private key"):
        bare.load_private_key()


def test_create_key_sends_algorithm_and_usage_and_the_key_tells_them() -> None:
    answer = {
        **KEY_JSON,
        "algorithm": "RSA_2048",
        "usage": "SIGN_VERIFY",
        "signing_algorithms": ["RSASSA_PSS_SHA_256", "RSASSA_PKCS1_V1_5_SHA_256"],
        "policy": {"sign": ["billing"], "verify": ["billing"]},
    }
    recorder = Recorder(httpx.Response(201, json=answer))
    with client(recorder) as c:
        key = c.create_key("signer", "RSA_2048", usage="SIGN_VERIFY", policy=km.Policy(sign=("billing",)))
    body = sent(recorder)
    assert (body["algorithm"], body["usage"], body["policy"]["sign"]) == ("RSA_2048", "SIGN_VERIFY", ["billing"])
    assert (key.usage, key.signing_algorithms, key.encryption_algorithms) == (
        "SIGN_VERIFY",
        ("RSASSA_PSS_SHA_256", "RSASSA_PKCS1_V1_5_SHA_256"),
        (),
    )
    assert key.policy.sign == key.policy.verify == ("billing",)


def test_a_key_from_a_service_without_usages() -> None:
    key = km.Key.from_json(KEY_JSON)
    assert key.usage is None and key.signing_algorithms == key.key_agreement_algorithms == ()


def test_policy_sends_asymmetric_rights_only_when_granted() -> None:
    assert set(km.Policy(encrypt=("a",)).to_json()) == {
        *("encrypt", "decrypt", "generate_data_key", "reencrypt", "mac", "tokenize", "detokenize"),
    }
    granted = km.Policy(sign=("a",), get_public_key=("a", "b"), generate_data_key_pair=("c",)).to_json()
    assert (granted["sign"], granted["get_public_key"], granted["generate_data_key_pair"]) == (["a"], ["a", "b"], ["c"])
    assert "verify" not in granted and "derive_shared_secret" not in granted
    assert km.Policy.from_json(granted) == km.Policy(
        sign=("a",), get_public_key=("a", "b"), generate_data_key_pair=("c",)
    )


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_request", km.InvalidRequest),
        (403, "forbidden", km.Forbidden),
        (404, "key_not_found", km.KeyNotFound),
        (409, "key_disabled", km.KeyDisabled),
    ],
)
def test_refusals_of_sign_map_to_the_exception_hierarchy(status: int, code: str, cls: type[km.APIError]) -> None:
    with client(Recorder(error(status, code, "why"))) as c, pytest.raises(cls) as raised:
        c.sign("signer", b"m", "ECDSA_SHA_384")
    assert (raised.value.status, raised.value.key) == (status, "signer") and "[key 'signer']" in str(raised.value)


def test_every_bad_oaep_ciphertext_is_decryption_failed() -> None:
    bad = Recorder(error(400, "decryption_failed", "decryption failed"))
    with client(bad) as c, pytest.raises(km.DecryptionFailed):
        c.decrypt(b"\x00" * 256, key="rsa", algorithm="RSAES_OAEP_SHA_256")


def test_sign_and_verify_are_retried_on_503() -> None:
    answer = httpx.Response(200, json={"signature": b64(b"s"), "key_id": "k1", "algorithm": "ECDSA_SHA_256"})
    recorder = Recorder(error(503, "hsm_unavailable"), answer)
    sleeps: list[float] = []
    with client(recorder, sleeps) as c:
        assert c.sign("signer", b"m", "ECDSA_SHA_256").signature == b"s"
    assert len(recorder.requests) == 2 and len(sleeps) == 1


def test_the_async_client_has_the_same_calls() -> None:
    signature = EC_KEY.sign(b"m", ec.ECDSA(hashes.SHA256()))
    recorder = Recorder(
        public_key_answer(EC_KEY, "ECC_NIST_P256", signing_algorithms=["ECDSA_SHA_256"]),
        httpx.Response(200, json={"signature": b64(signature), "key_id": "k1", "algorithm": "ECDSA_SHA_256"}),
        httpx.Response(200, json={"valid": True, "key_id": "k1", "algorithm": "ECDSA_SHA_256"}),
        httpx.Response(200, json={"shared_secret": b64(b"z" * 32), "key_id": "k1", "algorithm": "ECDH"}),
        httpx.Response(200, json={"ciphertext": b64(b"c" * 256), "key_id": "k1", "algorithm": "RSAES_OAEP_SHA_1"}),
        httpx.Response(200, json={"plaintext": b64(b"p")}),
    )

    async def run() -> None:
        transport = httpx.MockTransport(recorder)
        async with km.AsyncKeyManager("https://km.test", token="t", transport=transport) as c:
            public = await c.get_public_key("signer")
            signed = await c.sign("signer", b"m", "ECDSA_SHA_256")
            public_key = public.load()
            assert isinstance(public_key, ec.EllipticCurvePublicKey)
            public_key.verify(signed.signature, b"m", ec.ECDSA(hashes.SHA256()))
            assert await c.verify("signer", b"m", signed, "ECDSA_SHA_256") is True
            assert (await c.derive_shared_secret("agree", public)).secret == b"z" * 32
            sealed = await c.encrypt("rsa", b"p", algorithm="RSAES_OAEP_SHA_1")
            assert await c.decrypt(sealed, key="rsa", algorithm="RSAES_OAEP_SHA_1") == b"p"

    asyncio.run(run())
    paths = [r.url.path.rsplit("/", 1)[-1] for r in recorder.requests]
    assert paths == ["public-key", "sign", "verify", "derive-shared-secret", "encrypt", "decrypt"]
