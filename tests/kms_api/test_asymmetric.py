"""Asymmetric keys through unmodified boto3: CreateKey KeySpec/KeyUsage, DescribeKey's algorithms,
GetPublicKey, Sign, Verify, Encrypt/Decrypt/ReEncrypt with RSAES-OAEP, DeriveSharedSecret,
GenerateDataKeyPair(WithoutPlaintext), rotation, and AWS's error for every misuse.

Signatures made in the HSM are verified by ``cryptography`` with the public key GetPublicKey gives;
shared secrets are compared with ``cryptography``'s own ECDH; RSAES-OAEP ciphertexts made by
``cryptography`` are opened by Decrypt.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

from tests.e2e.conftest import Server
from tests.kms_api.conftest import KmsFactory, Pair

KeyFactory = Callable[[str, str], dict[str, Any]]

RSA_SIGNING = [
    "RSASSA_PSS_SHA_256",
    "RSASSA_PSS_SHA_384",
    "RSASSA_PSS_SHA_512",
    "RSASSA_PKCS1_V1_5_SHA_256",
    "RSASSA_PKCS1_V1_5_SHA_384",
    "RSASSA_PKCS1_V1_5_SHA_512",
]
OAEP = ["RSAES_OAEP_SHA_1", "RSAES_OAEP_SHA_256"]
# spec, usage: the algorithms DescribeKey and GetPublicKey list (AWS's, per key spec)
DESCRIBED = [
    ("RSA_2048", "SIGN_VERIFY", {"SigningAlgorithms": RSA_SIGNING}),
    ("RSA_2048", "ENCRYPT_DECRYPT", {"EncryptionAlgorithms": OAEP}),
    ("ECC_NIST_P256", "SIGN_VERIFY", {"SigningAlgorithms": ["ECDSA_SHA_256"]}),
    ("ECC_NIST_P384", "SIGN_VERIFY", {"SigningAlgorithms": ["ECDSA_SHA_384"]}),
    ("ECC_NIST_P521", "SIGN_VERIFY", {"SigningAlgorithms": ["ECDSA_SHA_512"]}),
    ("ECC_SECG_P256K1", "SIGN_VERIFY", {"SigningAlgorithms": ["ECDSA_SHA_256"]}),
    ("ECC_NIST_EDWARDS25519", "SIGN_VERIFY", {"SigningAlgorithms": ["ED25519_SHA_512", "ED25519_PH_SHA_512"]}),
    ("ECC_NIST_P256", "KEY_AGREEMENT", {"KeyAgreementAlgorithms": ["ECDH"]}),
    ("ECC_NIST_P384", "KEY_AGREEMENT", {"KeyAgreementAlgorithms": ["ECDH"]}),
    ("ECC_NIST_P521", "KEY_AGREEMENT", {"KeyAgreementAlgorithms": ["ECDH"]}),
]
SIGNING = [
    *(("RSA_2048", algorithm) for algorithm in RSA_SIGNING),
    ("ECC_NIST_P256", "ECDSA_SHA_256"),
    ("ECC_NIST_P384", "ECDSA_SHA_384"),
    ("ECC_NIST_P521", "ECDSA_SHA_512"),
    ("ECC_SECG_P256K1", "ECDSA_SHA_256"),
]
CURVES = {
    "ECC_NIST_P256": ec.SECP256R1,
    "ECC_NIST_P384": ec.SECP384R1,
    "ECC_NIST_P521": ec.SECP521R1,
    "ECC_SECG_P256K1": ec.SECP256K1,
}
HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
ALGORITHM_FIELDS = ("SigningAlgorithms", "EncryptionAlgorithms", "KeyAgreementAlgorithms", "MacAlgorithms")


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def refused(call: Callable[[], Any]) -> tuple[str, str]:
    """The AWS error code and message of a call that must fail."""
    with pytest.raises(ClientError) as error:
        call()
    return code(error), str(error.value.response["Error"]["Message"])


ALL_RIGHTS = (
    "encrypt",
    "decrypt",
    "generate_data_key",
    "reencrypt",
    "mac",
    "sign",
    "verify",
    "get_public_key",
    "derive_shared_secret",
    "generate_data_key_pair",
)


def usable_for_anything(server: Server, key: dict[str, Any]) -> dict[str, Any]:
    """``key`` with a policy granting the admin every right, so that a misuse reaches the key's
    usage and spec (a right the policy does not grant is refused first: AccessDeniedException)."""
    with server.client(server.admin_token) as admin:
        answer = admin.patch(
            f"/v1/keys/{key['KeyId']}", json={"policy": {right: ["kms-admin"] for right in ALL_RIGHTS}}
        )
        assert answer.status_code == 200, answer.text
    return key


@pytest.fixture(scope="module")
def asym_key(admin_kms: Any, kms_server: Server) -> KeyFactory:
    """``asym_key(spec, usage)``: the KeyMetadata of one key of that spec and usage (``SYMMETRIC_DEFAULT``
    and ``HMAC_256`` too), made once, the admin holding every right on it."""
    made: dict[tuple[str, str], dict[str, Any]] = {}

    def get(spec: str, usage: str) -> dict[str, Any]:
        if (spec, usage) not in made:
            metadata = admin_kms.create_key(KeySpec=spec, KeyUsage=usage, Description=f"{spec} {usage}")["KeyMetadata"]
            made[spec, usage] = usable_for_anything(kms_server, metadata)
        return made[spec, usage]

    return get


def symmetric_key(get: KeyFactory) -> str:
    return get("SYMMETRIC_DEFAULT", "ENCRYPT_DECRYPT")["KeyId"]


def hmac_key(get: KeyFactory) -> str:
    return get("HMAC_256", "GENERATE_VERIFY_MAC")["KeyId"]


@pytest.fixture(scope="module")
def unchecked(kms_client: KmsFactory, admin_pair: Pair) -> Any:
    """An admin client without boto3's own parameter checks: the server's refusals are what is tested."""
    return kms_client(admin_pair, parameter_validation=False)


def public_key(admin_kms: Any, key: dict[str, Any]) -> Any:
    return serialization.load_der_public_key(admin_kms.get_public_key(KeyId=key["KeyId"])["PublicKey"])


def verify_locally(public: Any, algorithm: str, message: bytes, signature: bytes, *, digest: bool = False) -> None:
    """``cryptography``'s verification of a signature made by the HSM (raises InvalidSignature)."""
    chosen = HASHES[algorithm[-3:]]()
    prehashed: Any = utils.Prehashed(chosen) if digest else chosen
    if algorithm.startswith("RSASSA_PSS"):
        pss = padding.PSS(mgf=padding.MGF1(chosen), salt_length=chosen.digest_size)
        public.verify(signature, message, pss, prehashed)
    elif algorithm.startswith("RSASSA_PKCS1"):
        public.verify(signature, message, padding.PKCS1v15(), prehashed)
    else:
        public.verify(signature, message, ec.ECDSA(prehashed))


# -- CreateKey, DescribeKey, GetPublicKey -------------------------------------------------------


@pytest.mark.parametrize(("spec", "usage", "algorithms"), DESCRIBED)
def test_create_key_describes_each_spec_and_usage_as_aws(
    admin_kms: Any, asym_key: KeyFactory, spec: str, usage: str, algorithms: dict[str, list[str]]
) -> None:
    made = asym_key(spec, usage)
    described = admin_kms.describe_key(KeyId=made["KeyId"])["KeyMetadata"]
    for metadata in (made, described):
        assert metadata["KeySpec"] == metadata["CustomerMasterKeySpec"] == spec
        assert metadata["KeyUsage"] == usage and metadata["KeyState"] == "Enabled" and metadata["Origin"] == "AWS_KMS"
        assert {field: metadata[field] for field in ALGORITHM_FIELDS if field in metadata} == algorithms
    shown = admin_kms.get_public_key(KeyId=made["Arn"])
    assert shown["KeyId"] == made["Arn"] and shown["KeySpec"] == shown["CustomerMasterKeySpec"] == spec
    assert shown["KeyUsage"] == usage
    assert {field: shown[field] for field in ALGORITHM_FIELDS if field in shown} == algorithms
    loaded = serialization.load_der_public_key(shown["PublicKey"])
    if spec.startswith("RSA"):
        assert isinstance(loaded, rsa.RSAPublicKey) and loaded.key_size == int(spec[4:])
    elif spec == "ECC_NIST_EDWARDS25519":
        assert isinstance(loaded, ed25519.Ed25519PublicKey)
    else:
        assert isinstance(loaded, ec.EllipticCurvePublicKey) and isinstance(loaded.curve, CURVES[spec])
    # the DER SubjectPublicKeyInfo, byte for byte as cryptography writes it
    spki = loaded.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert spki == shown["PublicKey"]


@pytest.mark.parametrize("spec", ["RSA_3072", "RSA_4096"])
def test_the_larger_rsa_specs_sign_and_show_their_public_key(admin_kms: Any, spec: str) -> None:
    key = admin_kms.create_key(KeySpec=spec, KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    public = public_key(admin_kms, key)
    assert public.key_size == int(spec[4:]) and key["SigningAlgorithms"] == RSA_SIGNING
    signature = admin_kms.sign(KeyId=key["KeyId"], Message=b"m", SigningAlgorithm="RSASSA_PSS_SHA_512")["Signature"]
    assert len(signature) == int(spec[4:]) // 8
    verify_locally(public, "RSASSA_PSS_SHA_512", b"m", signature)


def test_an_rsa_key_without_key_usage_encrypts_as_aws_defaults(admin_kms: Any) -> None:
    key = admin_kms.create_key(KeySpec="RSA_2048")["KeyMetadata"]
    assert key["KeyUsage"] == "ENCRYPT_DECRYPT" and key["EncryptionAlgorithms"] == OAEP


@pytest.mark.parametrize(
    ("spec", "usage"),
    [
        ("RSA_2048", "KEY_AGREEMENT"),
        ("RSA_2048", "GENERATE_VERIFY_MAC"),
        ("ECC_NIST_P256", "ENCRYPT_DECRYPT"),
        ("ECC_SECG_P256K1", "KEY_AGREEMENT"),
        ("ECC_NIST_EDWARDS25519", "KEY_AGREEMENT"),
        ("ECC_NIST_EDWARDS25519", "ENCRYPT_DECRYPT"),
        ("SYMMETRIC_DEFAULT", "SIGN_VERIFY"),
        ("HMAC_256", "ENCRYPT_DECRYPT"),
    ],
)
def test_create_key_refuses_a_usage_the_spec_does_not_allow(admin_kms: Any, spec: str, usage: str) -> None:
    before = len(admin_kms.list_keys(Limit=1000)["Keys"])
    error, message = refused(lambda: admin_kms.create_key(KeySpec=spec, KeyUsage=usage))
    assert error == "ValidationException" and usage in message
    assert len(admin_kms.list_keys(Limit=1000)["Keys"]) == before  # nothing made half-way


def test_create_key_refusals_by_name(unchecked: Any) -> None:
    for spec in ("SM2", "ML_DSA_44", "ML_KEM_768", "RSA_1024"):
        error, message = refused(lambda spec=spec: unchecked.create_key(KeySpec=spec))
        assert error == "UnsupportedOperationException" and spec in message
    error, message = refused(lambda: unchecked.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_ONLY"))
    assert error == "ValidationException" and "KeyUsage" in message
    error, message = refused(lambda: unchecked.create_key(KeySpec="ML_DSA_65", KeyUsage="SIGN_VERIFY"))
    assert error == "UnsupportedOperationException"


def test_get_public_key_of_a_symmetric_or_hmac_key_is_unsupported(admin_kms: Any, asym_key: KeyFactory) -> None:
    for key in (symmetric_key(asym_key), hmac_key(asym_key)):
        error, _ = refused(lambda key=key: admin_kms.get_public_key(KeyId=key))
        assert error == "UnsupportedOperationException"
    error, _ = refused(lambda: admin_kms.get_public_key(KeyId="alias/no-such-key"))
    assert error == "NotFoundException"


# -- Sign and Verify ------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "algorithm"), SIGNING)
def test_sign_raw_and_digest_verified_by_cryptography_and_by_verify(
    admin_kms: Any, asym_key: KeyFactory, spec: str, algorithm: str
) -> None:
    key = asym_key(spec, "SIGN_VERIFY")
    public = public_key(admin_kms, key)
    message = b"a document to sign " * 50
    signed = admin_kms.sign(KeyId=key["KeyId"], Message=message, SigningAlgorithm=algorithm)
    assert signed["KeyId"] == key["Arn"] and signed["SigningAlgorithm"] == algorithm
    verify_locally(public, algorithm, message, signed["Signature"])
    checked = admin_kms.verify(
        KeyId=key["KeyId"], Message=message, Signature=signed["Signature"], SigningAlgorithm=algorithm
    )
    assert checked["SignatureValid"] is True and checked["KeyId"] == key["Arn"]
    digest = hashlib.new("sha" + algorithm[-3:], message).digest()
    by_digest = admin_kms.sign(KeyId=key["KeyId"], Message=digest, MessageType="DIGEST", SigningAlgorithm=algorithm)
    verify_locally(public, algorithm, digest, by_digest["Signature"], digest=True)
    verify_locally(public, algorithm, message, by_digest["Signature"])  # the same as signing the message
    assert admin_kms.verify(
        KeyId=key["KeyId"], Message=message, Signature=by_digest["Signature"], SigningAlgorithm=algorithm
    )["SignatureValid"]
    # a signature of something else, or a changed one, does not verify: KMSInvalidSignatureException
    changed = bytearray(signed["Signature"])
    changed[len(changed) // 2] ^= 1
    for other_message, signature in ((b"another document", signed["Signature"]), (message, bytes(changed))):
        error, _ = refused(
            lambda m=other_message, s=signature: admin_kms.verify(
                KeyId=key["KeyId"], Message=m, Signature=s, SigningAlgorithm=algorithm
            )
        )
        assert error == "KMSInvalidSignatureException"
    with pytest.raises(InvalidSignature):
        verify_locally(public, algorithm, b"another document", signed["Signature"])


def test_ecdsa_signatures_are_der_encoded(admin_kms: Any, asym_key: KeyFactory) -> None:
    key = asym_key("ECC_NIST_P256", "SIGN_VERIFY")
    signature = admin_kms.sign(KeyId=key["KeyId"], Message=b"m", SigningAlgorithm="ECDSA_SHA_256")["Signature"]
    r, s = utils.decode_dss_signature(signature)
    assert utils.encode_dss_signature(r, s) == signature and signature[0] == 0x30


def test_ed25519_signs_raw_messages_and_ed25519ph_digests(admin_kms: Any, asym_key: KeyFactory) -> None:
    key = asym_key("ECC_NIST_EDWARDS25519", "SIGN_VERIFY")
    public = public_key(admin_kms, key)
    message = b"an Ed25519 message"
    signature = admin_kms.sign(KeyId=key["KeyId"], Message=message, SigningAlgorithm="ED25519_SHA_512")["Signature"]
    assert len(signature) == 64
    public.verify(signature, message)
    assert admin_kms.verify(
        KeyId=key["KeyId"], Message=message, Signature=signature, SigningAlgorithm="ED25519_SHA_512"
    )["SignatureValid"]
    digest = hashlib.sha512(message).digest()
    error = refused(
        lambda: admin_kms.sign(
            KeyId=key["KeyId"], Message=digest, SigningAlgorithm="ED25519_SHA_512", MessageType="DIGEST"
        )
    )[0]
    assert error in ("InvalidKeyUsageException", "ValidationException")
    try:
        prehashed = admin_kms.sign(
            KeyId=key["KeyId"], Message=digest, MessageType="DIGEST", SigningAlgorithm="ED25519_PH_SHA_512"
        )["Signature"]
    except ClientError as exc:  # SoftHSM 2.6.1 has no Ed25519ph: refused by name, as the HSM lacks it
        assert exc.response["Error"]["Code"] == "UnsupportedOperationException"
        assert "ED25519_PH_SHA_512" in exc.response["Error"]["Message"]
        return
    assert len(prehashed) == 64
    checked = admin_kms.verify(
        KeyId=key["KeyId"],
        Message=digest,
        MessageType="DIGEST",
        Signature=prehashed,
        SigningAlgorithm="ED25519_PH_SHA_512",
    )
    assert checked["SignatureValid"]
    error, _ = refused(
        lambda: admin_kms.verify(
            KeyId=key["KeyId"],
            Message=digest,
            MessageType="DIGEST",
            Signature=signature,
            SigningAlgorithm="ED25519_PH_SHA_512",
        )
    )
    assert error == "KMSInvalidSignatureException"


def test_sign_and_verify_refusals(admin_kms: Any, unchecked: Any, asym_key: KeyFactory) -> None:
    rsa_key, ec_key = asym_key("RSA_2048", "SIGN_VERIFY")["KeyId"], asym_key("ECC_NIST_P256", "SIGN_VERIFY")["KeyId"]
    oaep_key, ecdh_key = (
        asym_key("RSA_2048", "ENCRYPT_DECRYPT")["KeyId"],
        asym_key("ECC_NIST_P256", "KEY_AGREEMENT")["KeyId"],
    )
    symmetric = symmetric_key(asym_key)
    cases: list[tuple[str, dict[str, Any], str]] = [
        # a signing algorithm of another spec
        ("wrong algorithm", {"KeyId": rsa_key, "SigningAlgorithm": "ECDSA_SHA_256"}, "InvalidKeyUsageException"),
        ("wrong curve", {"KeyId": ec_key, "SigningAlgorithm": "ECDSA_SHA_384"}, "InvalidKeyUsageException"),
        # a key of another usage or kind
        (
            "RSA encryption key",
            {"KeyId": oaep_key, "SigningAlgorithm": "RSASSA_PSS_SHA_256"},
            "InvalidKeyUsageException",
        ),
        ("agreement key", {"KeyId": ecdh_key, "SigningAlgorithm": "ECDSA_SHA_256"}, "InvalidKeyUsageException"),
        ("symmetric key", {"KeyId": symmetric, "SigningAlgorithm": "ECDSA_SHA_256"}, "InvalidKeyUsageException"),
        # a DIGEST of the wrong length; a RAW message over 4,096 bytes
        (
            "short digest",
            {"KeyId": ec_key, "SigningAlgorithm": "ECDSA_SHA_256", "MessageType": "DIGEST", "Message": b"x" * 31},
            "ValidationException",
        ),
        (
            "long digest",
            {"KeyId": rsa_key, "SigningAlgorithm": "RSASSA_PSS_SHA_384", "MessageType": "DIGEST", "Message": b"x" * 32},
            "ValidationException",
        ),
        (
            "long message",
            {"KeyId": ec_key, "SigningAlgorithm": "ECDSA_SHA_256", "Message": b"x" * 4097},
            "ValidationException",
        ),
        # names AWS does not have, names of AWS's this service does not serve
        ("unknown algorithm", {"KeyId": ec_key, "SigningAlgorithm": "ECDSA_SHA_1"}, "ValidationException"),
        (
            "unknown message type",
            {"KeyId": ec_key, "SigningAlgorithm": "ECDSA_SHA_256", "MessageType": "HASH"},
            "ValidationException",
        ),
        ("SM2", {"KeyId": ec_key, "SigningAlgorithm": "SM2DSA"}, "UnsupportedOperationException"),
        ("no algorithm", {"KeyId": ec_key}, "ValidationException"),
        ("no such key", {"KeyId": "alias/no-such-key", "SigningAlgorithm": "ECDSA_SHA_256"}, "NotFoundException"),
    ]
    for label, params, expected in cases:
        request = {"Message": b"message", **params}
        assert refused(lambda r=request: unchecked.sign(**r))[0] == expected, label
        assert refused(lambda r=request: unchecked.verify(Signature=b"s" * 64, **r))[0] == expected, label
    # a malformed signature is a signature that does not verify, never a 5xx
    for signature in (b"\x00", b"\x30" * 72, b"s" * 6144):
        for key, algorithm in ((ec_key, "ECDSA_SHA_256"), (rsa_key, "RSASSA_PKCS1_V1_5_SHA_256")):
            answer = refused(
                lambda k=key, a=algorithm, s=signature: admin_kms.verify(
                    KeyId=k, Message=b"m", Signature=s, SigningAlgorithm=a
                )
            )
            assert answer[0] == "KMSInvalidSignatureException"


def test_sign_needs_the_sign_right_and_verify_the_verify_right(
    admin_kms: Any, app_kms: Any, kms_server: Server, app_pair: Pair
) -> None:
    key = admin_kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    signature = admin_kms.sign(KeyId=key, Message=b"m", SigningAlgorithm="ECDSA_SHA_256")["Signature"]
    sign = lambda: app_kms.sign(KeyId=key, Message=b"m", SigningAlgorithm="ECDSA_SHA_256")  # noqa: E731
    verify = lambda: app_kms.verify(  # noqa: E731
        KeyId=key, Message=b"m", Signature=signature, SigningAlgorithm="ECDSA_SHA_256"
    )
    public = lambda: app_kms.get_public_key(KeyId=key)  # noqa: E731
    for call in (sign, verify, public):
        assert refused(call)[0] == "AccessDeniedException"
    with kms_server.client(kms_server.admin_token) as admin:
        answer = admin.patch(f"/v1/keys/{key}", json={"policy": {"verify": [app_pair.principal]}})
        assert answer.status_code == 200, answer.text
    assert verify()["SignatureValid"]
    assert refused(sign)[0] == "AccessDeniedException" and refused(public)[0] == "AccessDeniedException"
    with kms_server.client(kms_server.admin_token) as admin:
        policy = {"sign": [app_pair.principal], "get_public_key": [app_pair.principal]}
        assert admin.patch(f"/v1/keys/{key}", json={"policy": policy}).status_code == 200
    assert sign()["KeyId"].endswith(key) and public()["KeyId"].endswith(key)
    assert refused(verify)[0] == "AccessDeniedException"


# -- Encrypt, Decrypt, ReEncrypt with RSAES-OAEP ----------------------------------------------------


def oaep_padding(algorithm: str) -> padding.OAEP:
    chosen = hashes.SHA1() if algorithm == "RSAES_OAEP_SHA_1" else hashes.SHA256()  # noqa: S303 (OAEP's, as AWS)
    return padding.OAEP(mgf=padding.MGF1(chosen), algorithm=chosen, label=None)


def oaep_served(admin_kms: Any, key_id: str, algorithm: str) -> bool:
    """Whether this HSM decrypts ``algorithm`` (SoftHSM 2.6.1 refuses OAEP with SHA-256): when it
    does not, Encrypt refuses it by name (UnsupportedOperationException), so no ciphertext is made
    that the HSM could not open."""
    try:
        admin_kms.encrypt(KeyId=key_id, Plaintext=b"probe", EncryptionAlgorithm=algorithm)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "UnsupportedOperationException"
        assert algorithm in exc.response["Error"]["Message"]
        return False
    return True


@pytest.mark.parametrize("algorithm", OAEP)
def test_rsaes_oaep_encrypt_and_decrypt(admin_kms: Any, asym_key: KeyFactory, algorithm: str) -> None:
    key = asym_key("RSA_2048", "ENCRYPT_DECRYPT")
    if not oaep_served(admin_kms, key["KeyId"], algorithm):
        return
    sealed = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"a card number", EncryptionAlgorithm=algorithm)
    assert sealed["KeyId"] == key["Arn"] and sealed["EncryptionAlgorithm"] == algorithm
    assert len(sealed["CiphertextBlob"]) == 256  # the raw OAEP ciphertext, as AWS returns it
    opened = admin_kms.decrypt(CiphertextBlob=sealed["CiphertextBlob"], KeyId=key["Arn"], EncryptionAlgorithm=algorithm)
    assert opened["Plaintext"] == b"a card number" and opened["EncryptionAlgorithm"] == algorithm
    assert opened["KeyId"] == key["Arn"]
    # a ciphertext cryptography made with the public key opens too
    made = public_key(admin_kms, key).encrypt(b"made elsewhere", oaep_padding(algorithm))
    assert (
        admin_kms.decrypt(CiphertextBlob=made, KeyId=key["KeyId"], EncryptionAlgorithm=algorithm)["Plaintext"]
        == b"made elsewhere"
    )
    longest = 256 - 2 * (20 if algorithm.endswith("_1") else 32) - 2
    assert admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"p" * longest, EncryptionAlgorithm=algorithm)
    error, _ = refused(
        lambda: admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"p" * (longest + 1), EncryptionAlgorithm=algorithm)
    )
    assert error == "ValidationException"


def test_every_bad_oaep_ciphertext_is_the_same_invalid_ciphertext(admin_kms: Any, asym_key: KeyFactory) -> None:
    key = asym_key("RSA_2048", "ENCRYPT_DECRYPT")["KeyId"]
    sealed = admin_kms.encrypt(KeyId=key, Plaintext=b"secret", EncryptionAlgorithm="RSAES_OAEP_SHA_1")["CiphertextBlob"]
    changed = bytearray(sealed)
    changed[100] ^= 1
    answers = set()
    for blob in (bytes(changed), sealed[:-1], sealed + b"\x00", b"\x00" * 256, b"x"):
        answers.add(
            refused(
                lambda b=blob: admin_kms.decrypt(CiphertextBlob=b, KeyId=key, EncryptionAlgorithm="RSAES_OAEP_SHA_1")
            )
        )
    symmetric = admin_kms.encrypt(KeyId=admin_kms.create_key()["KeyMetadata"]["KeyId"], Plaintext=b"s")
    answers.add(
        refused(
            lambda: admin_kms.decrypt(
                CiphertextBlob=symmetric["CiphertextBlob"], KeyId=key, EncryptionAlgorithm="RSAES_OAEP_SHA_1"
            )
        )
    )
    assert answers == {("InvalidCiphertextException", "Unable to decrypt the ciphertext")}


def test_rsaes_oaep_refusals(admin_kms: Any, unchecked: Any, asym_key: KeyFactory) -> None:
    key = asym_key("RSA_2048", "ENCRYPT_DECRYPT")["KeyId"]
    signing = asym_key("RSA_2048", "SIGN_VERIFY")["KeyId"]
    symmetric = symmetric_key(asym_key)
    sealed = admin_kms.encrypt(KeyId=key, Plaintext=b"p", EncryptionAlgorithm="RSAES_OAEP_SHA_1")["CiphertextBlob"]
    cases: list[tuple[str, Callable[[], Any], str]] = [
        (
            "decrypt without KeyId",
            lambda: admin_kms.decrypt(CiphertextBlob=sealed, EncryptionAlgorithm="RSAES_OAEP_SHA_1"),
            "ValidationException",
        ),
        ("RSA key, no algorithm", lambda: admin_kms.encrypt(KeyId=key, Plaintext=b"p"), "InvalidKeyUsageException"),
        (
            "RSA key, decrypt, no algorithm",
            lambda: admin_kms.decrypt(CiphertextBlob=sealed, KeyId=key),
            "InvalidKeyUsageException",
        ),
        (
            "symmetric key, RSA algorithm",
            lambda: admin_kms.encrypt(KeyId=symmetric, Plaintext=b"p", EncryptionAlgorithm="RSAES_OAEP_SHA_1"),
            "InvalidKeyUsageException",
        ),
        (
            "signing key",
            lambda: admin_kms.encrypt(KeyId=signing, Plaintext=b"p", EncryptionAlgorithm="RSAES_OAEP_SHA_1"),
            "InvalidKeyUsageException",
        ),
        (
            "context",
            lambda: admin_kms.encrypt(
                KeyId=key, Plaintext=b"p", EncryptionAlgorithm="RSAES_OAEP_SHA_1", EncryptionContext={"a": "b"}
            ),
            "ValidationException",
        ),
        (
            "unknown algorithm",
            lambda: unchecked.encrypt(KeyId=key, Plaintext=b"p", EncryptionAlgorithm="RSAES_PKCS1"),
            "ValidationException",
        ),
        (
            "SM2PKE",
            lambda: unchecked.encrypt(KeyId=key, Plaintext=b"p", EncryptionAlgorithm="SM2PKE"),
            "UnsupportedOperationException",
        ),
        ("data key", lambda: admin_kms.generate_data_key(KeyId=key, KeySpec="AES_256"), "InvalidKeyUsageException"),
        (
            "MAC",
            lambda: admin_kms.generate_mac(KeyId=key, Message=b"m", MacAlgorithm="HMAC_SHA_256"),
            "InvalidKeyUsageException",
        ),
    ]
    for label, call, expected in cases:
        assert refused(call)[0] == expected, label


def test_reencrypt_between_symmetric_and_asymmetric_keys(admin_kms: Any, asym_key: KeyFactory) -> None:
    rsa_key = asym_key("RSA_2048", "ENCRYPT_DECRYPT")
    symmetric = admin_kms.create_key()["KeyMetadata"]
    first = admin_kms.encrypt(KeyId=symmetric["KeyId"], Plaintext=b"moving", EncryptionContext={"a": "1"})
    to_rsa = admin_kms.re_encrypt(
        CiphertextBlob=first["CiphertextBlob"],
        SourceEncryptionContext={"a": "1"},
        DestinationKeyId=rsa_key["KeyId"],
        DestinationEncryptionAlgorithm="RSAES_OAEP_SHA_1",
    )
    assert to_rsa["SourceKeyId"] == symmetric["Arn"] and to_rsa["KeyId"] == rsa_key["Arn"]
    assert to_rsa["SourceEncryptionAlgorithm"] == "SYMMETRIC_DEFAULT"
    assert to_rsa["DestinationEncryptionAlgorithm"] == "RSAES_OAEP_SHA_1" and len(to_rsa["CiphertextBlob"]) == 256
    assert (
        admin_kms.decrypt(
            CiphertextBlob=to_rsa["CiphertextBlob"], KeyId=rsa_key["KeyId"], EncryptionAlgorithm="RSAES_OAEP_SHA_1"
        )["Plaintext"]
        == b"moving"
    )
    back = admin_kms.re_encrypt(
        CiphertextBlob=to_rsa["CiphertextBlob"],
        SourceKeyId=rsa_key["KeyId"],
        SourceEncryptionAlgorithm="RSAES_OAEP_SHA_1",
        DestinationKeyId=symmetric["KeyId"],
        DestinationEncryptionContext={"b": "2"},
    )
    assert back["SourceKeyId"] == rsa_key["Arn"] and back["DestinationEncryptionAlgorithm"] == "SYMMETRIC_DEFAULT"
    opened = admin_kms.decrypt(CiphertextBlob=back["CiphertextBlob"], EncryptionContext={"b": "2"})
    assert opened["Plaintext"] == b"moving"
    rsa_to_rsa = admin_kms.re_encrypt(
        CiphertextBlob=to_rsa["CiphertextBlob"],
        SourceKeyId=rsa_key["KeyId"],
        SourceEncryptionAlgorithm="RSAES_OAEP_SHA_1",
        DestinationKeyId=rsa_key["KeyId"],
        DestinationEncryptionAlgorithm="RSAES_OAEP_SHA_1",
    )
    assert rsa_to_rsa["CiphertextBlob"] != to_rsa["CiphertextBlob"]  # OAEP is randomised
    for call in (
        lambda: admin_kms.re_encrypt(  # an asymmetric source needs its key id
            CiphertextBlob=to_rsa["CiphertextBlob"],
            SourceEncryptionAlgorithm="RSAES_OAEP_SHA_1",
            DestinationKeyId=symmetric["KeyId"],
        ),
        lambda: admin_kms.re_encrypt(  # an RSA destination needs its algorithm
            CiphertextBlob=first["CiphertextBlob"],
            SourceEncryptionContext={"a": "1"},
            DestinationKeyId=rsa_key["KeyId"],
        ),
    ):
        assert refused(call)[0] in ("ValidationException", "InvalidKeyUsageException")


# -- DeriveSharedSecret ----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["ECC_NIST_P256", "ECC_NIST_P384", "ECC_NIST_P521"])
def test_derive_shared_secret_matches_cryptography(admin_kms: Any, asym_key: KeyFactory, spec: str) -> None:
    key = asym_key(spec, "KEY_AGREEMENT")
    peer = ec.generate_private_key(CURVES[spec]())
    peer_spki = peer.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    derived = admin_kms.derive_shared_secret(KeyId=key["KeyId"], KeyAgreementAlgorithm="ECDH", PublicKey=peer_spki)
    assert derived["KeyId"] == key["Arn"] and derived["KeyAgreementAlgorithm"] == "ECDH"
    assert derived["KeyOrigin"] == "AWS_KMS"
    assert derived["SharedSecret"] == peer.exchange(ec.ECDH(), public_key(admin_kms, key))


def test_derive_shared_secret_refusals(admin_kms: Any, unchecked: Any, asym_key: KeyFactory) -> None:
    key = asym_key("ECC_NIST_P256", "KEY_AGREEMENT")["KeyId"]
    signing = asym_key("ECC_NIST_P256", "SIGN_VERIFY")["KeyId"]

    def spki(private: Any) -> bytes:
        return private.public_key().public_bytes(  # type: ignore[no-any-return]
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    p256 = spki(ec.generate_private_key(ec.SECP256R1()))
    cases: list[tuple[str, dict[str, Any], str]] = [
        (
            "peer of another curve",
            {"KeyId": key, "PublicKey": spki(ec.generate_private_key(ec.SECP384R1()))},
            "ValidationException",
        ),
        (
            "peer RSA key",
            {"KeyId": key, "PublicKey": spki(rsa.generate_private_key(65537, 2048))},
            "ValidationException",
        ),
        ("not a public key", {"KeyId": key, "PublicKey": b"\x30\x03\x02\x01\x00"}, "ValidationException"),
        ("garbage", {"KeyId": key, "PublicKey": b"not DER at all"}, "ValidationException"),
        ("signing key", {"KeyId": signing, "PublicKey": p256}, "InvalidKeyUsageException"),
        ("symmetric key", {"KeyId": symmetric_key(asym_key), "PublicKey": p256}, "InvalidKeyUsageException"),
        (
            "unknown algorithm",
            {"KeyId": key, "PublicKey": p256, "KeyAgreementAlgorithm": "ECMQV"},
            "ValidationException",
        ),
    ]
    for label, params, expected in cases:
        request = {"KeyAgreementAlgorithm": "ECDH", **params}
        assert refused(lambda r=request: unchecked.derive_shared_secret(**r))[0] == expected, label


# -- GenerateDataKeyPair ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pair_spec",
    [
        "RSA_2048",
        "RSA_3072",
        "RSA_4096",
        "ECC_NIST_P256",
        "ECC_NIST_P384",
        "ECC_NIST_P521",
        "ECC_SECG_P256K1",
        "ECC_NIST_EDWARDS25519",
    ],
)
def test_generate_data_key_pair(admin_kms: Any, pair_spec: str) -> None:
    wrapping = admin_kms.create_key()["KeyMetadata"]
    context = {"purpose": "data key pair"}
    made = admin_kms.generate_data_key_pair(KeyId=wrapping["KeyId"], KeyPairSpec=pair_spec, EncryptionContext=context)
    assert made["KeyId"] == wrapping["Arn"] and made["KeyPairSpec"] == pair_spec
    private = serialization.load_der_private_key(made["PrivateKeyPlaintext"], password=None)
    public = serialization.load_der_public_key(made["PublicKey"])
    assert (
        private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        == made["PublicKey"]
    )
    if pair_spec.startswith("RSA"):
        assert isinstance(public, rsa.RSAPublicKey) and public.key_size == int(pair_spec[4:])
    elif pair_spec == "ECC_NIST_EDWARDS25519":
        assert isinstance(public, ed25519.Ed25519PublicKey)
    else:
        assert isinstance(public, ec.EllipticCurvePublicKey) and isinstance(public.curve, CURVES[pair_spec])
    blob = made["PrivateKeyCiphertextBlob"]
    assert blob[:3] == b"km\x01" and bytes.fromhex(wrapping["KeyId"]) == blob[4:20]  # our blob, under our key
    assert admin_kms.decrypt(CiphertextBlob=blob, EncryptionContext=context)["Plaintext"] == made["PrivateKeyPlaintext"]
    error, _ = refused(lambda: admin_kms.decrypt(CiphertextBlob=blob))
    assert error == "InvalidCiphertextException"
    bare = admin_kms.generate_data_key_pair_without_plaintext(KeyId=wrapping["KeyId"], KeyPairSpec=pair_spec)
    assert "PrivateKeyPlaintext" not in bare and bare["KeyPairSpec"] == pair_spec
    opened = serialization.load_der_private_key(
        admin_kms.decrypt(CiphertextBlob=bare["PrivateKeyCiphertextBlob"])["Plaintext"], password=None
    )
    assert (
        opened.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        == bare["PublicKey"]
    )


def test_generate_data_key_pair_refusals(admin_kms: Any, unchecked: Any, asym_key: KeyFactory) -> None:
    symmetric = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("RSA key", {"KeyId": asym_key("RSA_2048", "ENCRYPT_DECRYPT")["KeyId"]}, "InvalidKeyUsageException"),
        ("HMAC key", {"KeyId": hmac_key(asym_key)}, "InvalidKeyUsageException"),
        ("unknown spec", {"KeyId": symmetric, "KeyPairSpec": "RSA_1024"}, "ValidationException"),
        ("SM2", {"KeyId": symmetric, "KeyPairSpec": "SM2"}, "UnsupportedOperationException"),
        ("a symmetric spec", {"KeyId": symmetric, "KeyPairSpec": "SYMMETRIC_DEFAULT"}, "ValidationException"),
        ("no spec", {"KeyId": symmetric, "KeyPairSpec": None}, "ValidationException"),
        ("no such key", {"KeyId": "alias/no-such-key"}, "NotFoundException"),
    ]
    for label, params, expected in cases:
        request = {key: value for key, value in {"KeyPairSpec": "ECC_NIST_P256", **params}.items() if value is not None}
        assert refused(lambda r=request: unchecked.generate_data_key_pair(**r))[0] == expected, label
        assert refused(lambda r=request: unchecked.generate_data_key_pair_without_plaintext(**r))[0] == expected, label


# -- rotation, aliases, policies ---------------------------------------------------------------------


def test_asymmetric_and_hmac_keys_do_not_rotate(admin_kms: Any, asym_key: KeyFactory) -> None:
    """As AWS: their rotation status is false (Terraform's ``aws_kms_key`` reads it for every key);
    changing or listing their rotations is refused."""
    for spec, usage in (
        ("RSA_2048", "SIGN_VERIFY"),
        ("ECC_NIST_P256", "KEY_AGREEMENT"),
        ("ECC_NIST_P256", "SIGN_VERIFY"),
        ("HMAC_256", "GENERATE_VERIFY_MAC"),
    ):
        key = asym_key(spec, usage)
        status = admin_kms.get_key_rotation_status(KeyId=key["KeyId"])
        assert (status["KeyId"], status["KeyRotationEnabled"]) == (key["Arn"], False), spec
        assert "RotationPeriodInDays" not in status
        for call in (
            lambda k=key["KeyId"]: admin_kms.enable_key_rotation(KeyId=k),
            lambda k=key["KeyId"]: admin_kms.disable_key_rotation(KeyId=k),
            lambda k=key["KeyId"]: admin_kms.rotate_key_on_demand(KeyId=k),
            lambda k=key["KeyId"]: admin_kms.list_key_rotations(KeyId=k),
        ):
            assert refused(call)[0] == "UnsupportedOperationException", spec


def test_an_alias_moves_only_between_keys_of_one_type_and_usage(admin_kms: Any, asym_key: KeyFactory) -> None:
    signing = admin_kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    other_signing = asym_key("ECC_NIST_P384", "SIGN_VERIFY")
    admin_kms.create_alias(AliasName="alias/asym-signer", TargetKeyId=signing["KeyId"])
    for target in (
        asym_key("ECC_NIST_P256", "KEY_AGREEMENT"),
        asym_key("RSA_2048", "ENCRYPT_DECRYPT"),
        admin_kms.create_key()["KeyMetadata"],
    ):
        error, _ = refused(
            lambda t=target: admin_kms.update_alias(AliasName="alias/asym-signer", TargetKeyId=t["KeyId"])
        )
        assert error == "ValidationException"
    admin_kms.update_alias(AliasName="alias/asym-signer", TargetKeyId=other_signing["KeyId"])
    signed = admin_kms.sign(KeyId="alias/asym-signer", Message=b"m", SigningAlgorithm="ECDSA_SHA_384")
    assert signed["KeyId"] == other_signing["Arn"]


def policy_document(user: str, *groups: list[str]) -> str:
    """A key policy allowing ``user`` each group of actions, one statement per group."""
    statements = [
        {"Effect": "Allow", "Principal": {"AWS": [user]}, "Action": actions, "Resource": "*"} for actions in groups
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def test_put_key_policy_translates_the_asymmetric_actions(
    admin_kms: Any, app_kms: Any, kms_server: Server, app_pair: Pair
) -> None:
    key = admin_kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
    wrapping = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    user = f"arn:aws:iam::111122223333:user/{app_pair.principal}"
    document = policy_document(user, ["kms:Sign"], ["kms:Verify"], ["kms:GetPublicKey"])
    admin_kms.put_key_policy(KeyId=key, PolicyName="default", Policy=document)
    with kms_server.client(kms_server.admin_token) as admin:
        native = admin.get(f"/v1/keys/{key}").json()["policy"]
    assert native["sign"] == native["verify"] == native["get_public_key"] == [app_pair.principal]
    signature = app_kms.sign(KeyId=key, Message=b"m", SigningAlgorithm="ECDSA_SHA_256")["Signature"]
    checked = app_kms.verify(KeyId=key, Message=b"m", Signature=signature, SigningAlgorithm="ECDSA_SHA_256")
    assert checked["SignatureValid"]
    assert app_kms.get_public_key(KeyId=key)["KeySpec"] == "ECC_NIST_P256"
    shown = admin_kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"]
    assert '"kms:Sign"' in shown and '"kms:Verify"' in shown and '"kms:GetPublicKey"' in shown
    admin_kms.put_key_policy(
        KeyId=wrapping, PolicyName="default", Policy=policy_document(user, ["kms:GenerateDataKeyPair*"])
    )
    assert app_kms.generate_data_key_pair_without_plaintext(KeyId=wrapping, KeyPairSpec="ECC_NIST_P256")["KeyId"]
    half = policy_document(user, ["kms:GenerateDataKeyPair"])  # without ...WithoutPlaintext: not exact
    error, _ = refused(lambda: admin_kms.put_key_policy(KeyId=wrapping, PolicyName="default", Policy=half))
    assert error == "MalformedPolicyDocumentException"
    derive = policy_document(user, ["kms:DeriveSharedSecret"])
    admin_kms.put_key_policy(KeyId=wrapping, PolicyName="default", Policy=derive)
    with kms_server.client(kms_server.admin_token) as admin:
        native = admin.get(f"/v1/keys/{wrapping}").json()["policy"]
    assert native["derive_shared_secret"] == [app_pair.principal] and native["generate_data_key_pair"] == []


def test_asymmetric_calls_are_audited_without_messages_or_signatures(
    admin_kms: Any, kms_server: Server, asym_key: KeyFactory
) -> None:
    key = asym_key("ECC_NIST_P256", "SIGN_VERIFY")["KeyId"]
    message = b"audited-message-" + bytes(range(16))
    signature = admin_kms.sign(KeyId=key, Message=message, SigningAlgorithm="ECDSA_SHA_256")["Signature"]
    refused(lambda: admin_kms.verify(KeyId=key, Message=b"x", Signature=signature, SigningAlgorithm="ECDSA_SHA_256"))
    with kms_server.client(kms_server.admin_token) as admin:
        records = admin.get("/v1/audit", params={"key": key, "limit": 100}).json()["records"]
    actions = [(r["action"], r["outcome"], r.get("details", {}).get("error")) for r in records]
    assert ("kms.Sign", "ok", None) in actions
    assert any(a == "kms.Verify" and e == "KMSInvalidSignatureException" for a, _, e in actions)
    text = str(records)
    assert message.hex() not in text and signature.hex() not in text
    assert base64.b64encode(signature).decode() not in text and base64.b64encode(message).decode() not in text
