"""CreateKeyPair (RSA, from the table of key types), Sign/SignatureVerify with the HSM's private key,
the public key handed out by Get, RSA-OAEP Encrypt/Decrypt, with ``ProxyKmipClient`` over mTLS."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from kmip import enums
from kmip.pie.exceptions import KmipOperationFailure

from tests.kmip.server_fixtures import OWNER, STRANGER, KmipServer, kmip_server

__all__ = ["kmip_server"]

PSS = {
    "padding_method": enums.PaddingMethod.PSS,
    "hashing_algorithm": enums.HashingAlgorithm.SHA_256,
    "cryptographic_algorithm": enums.CryptographicAlgorithm.RSA,
}
SIGN = [enums.CryptographicUsageMask.SIGN, enums.CryptographicUsageMask.VERIFY]
CRYPT = [enums.CryptographicUsageMask.ENCRYPT, enums.CryptographicUsageMask.DECRYPT]


def test_a_key_pair_signs_in_the_hsm_and_hands_out_its_public_key(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as client:
        public_uid, private_uid = client.create_key_pair(
            enums.CryptographicAlgorithm.RSA, 2048, public_usage_mask=SIGN, private_usage_mask=SIGN
        )
        assert public_uid != private_uid
        client.activate(private_uid)
        client.activate(public_uid)
        signature = client.sign(b"a message", uid=private_uid, cryptographic_parameters=PSS)
        assert client.signature_verify(b"a message", signature, public_uid, PSS) == enums.ValidityIndicator.VALID
        assert client.signature_verify(b"another", signature, public_uid, PSS) == enums.ValidityIndicator.INVALID
        public = client.get(public_uid)
        assert public.key_format_type == enums.KeyFormatType.X_509
        loaded = serialization.load_der_public_key(public.value)
        assert isinstance(loaded, rsa.RSAPublicKey) and loaded.key_size == 2048
        loaded.verify(signature, b"a message", padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256())
        with pytest.raises(KmipOperationFailure) as private:
            client.get(private_uid)
        assert private.value.reason == enums.ResultReason.PERMISSION_DENIED
        kinds = {
            uid: client.get_attributes(uid, ["Object Type"])[1][0].attribute_value.value
            for uid in (public_uid, private_uid)
        }
        assert kinds == {public_uid: enums.ObjectType.PUBLIC_KEY, private_uid: enums.ObjectType.PRIVATE_KEY}
        client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, private_uid)
        client.revoke(enums.RevocationReasonCode.CESSATION_OF_OPERATION, public_uid)
        client.destroy(public_uid)
        client.destroy(private_uid)
        assert public_uid not in client.locate() and private_uid not in client.locate()
    with kmip_server.connected(STRANGER) as stranger, pytest.raises(KmipOperationFailure) as refused:
        stranger.sign(b"x", uid=private_uid, cryptographic_parameters=PSS)
    assert refused.value.reason == enums.ResultReason.ITEM_NOT_FOUND


def test_rsa_oaep_encrypts_with_the_public_key_and_decrypts_in_the_hsm(kmip_server: KmipServer) -> None:
    oaep = {"padding_method": enums.PaddingMethod.OAEP, "hashing_algorithm": enums.HashingAlgorithm.SHA_1}
    with kmip_server.connected(OWNER) as client:
        public_uid, private_uid = client.create_key_pair(
            enums.CryptographicAlgorithm.RSA, 2048, public_usage_mask=CRYPT, private_usage_mask=CRYPT
        )
        client.activate(private_uid)
        sealed, _ = client.encrypt(b"wrapped data key", uid=public_uid, cryptographic_parameters=oaep)
        assert len(sealed) == 256
        assert client.decrypt(sealed, uid=private_uid, cryptographic_parameters=oaep) == b"wrapped data key"
        with pytest.raises(KmipOperationFailure) as tampered:
            client.decrypt(bytes(256), uid=private_uid, cryptographic_parameters=oaep)
        assert tampered.value.reason == enums.ResultReason.CRYPTOGRAPHIC_FAILURE


def test_a_key_pair_of_another_size_is_refused_by_name(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as client, pytest.raises(KmipOperationFailure) as refused:
        client.create_key_pair(enums.CryptographicAlgorithm.RSA, 1024)
    assert refused.value.reason == enums.ResultReason.INVALID_FIELD
    assert "RSA-2048" in str(refused.value)


@pytest.mark.parametrize(
    ("algorithm", "bits", "hashing", "curve"),
    [
        (enums.CryptographicAlgorithm.EC, 256, enums.HashingAlgorithm.SHA_256, "secp256r1"),
        (enums.CryptographicAlgorithm.ECDSA, 384, enums.HashingAlgorithm.SHA_384, "secp384r1"),
        (enums.CryptographicAlgorithm.EC, 521, enums.HashingAlgorithm.SHA_512, "secp521r1"),
    ],
    ids=["P-256", "P-384", "P-521"],
)
def test_an_ec_key_pair_signs_ecdsa_in_the_hsm(
    kmip_server: KmipServer,
    algorithm: enums.CryptographicAlgorithm,
    bits: int,
    hashing: enums.HashingAlgorithm,
    curve: str,
) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    parameters = {"cryptographic_algorithm": algorithm, "hashing_algorithm": hashing}
    with kmip_server.connected(OWNER) as client:
        public_uid, private_uid = client.create_key_pair(
            algorithm, bits, public_usage_mask=SIGN, private_usage_mask=SIGN
        )
        client.activate(private_uid)
        signature = client.sign(b"an ec message", uid=private_uid, cryptographic_parameters=parameters)
        verdicts = [
            client.signature_verify(data, signature, public_uid, parameters) for data in (b"an ec message", b"other")
        ]
        assert verdicts == [enums.ValidityIndicator.VALID, enums.ValidityIndicator.INVALID]
        public = serialization.load_der_public_key(client.get(public_uid).value)
        shown = {a.attribute_name.value: a.attribute_value.value for a in client.get_attributes(private_uid)[1]}
        wrong = {"cryptographic_algorithm": algorithm, "hashing_algorithm": enums.HashingAlgorithm.SHA_1}
        with pytest.raises(KmipOperationFailure) as refused:
            client.sign(b"x", uid=private_uid, cryptographic_parameters=wrong)
    assert isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == curve
    public.verify(signature, b"an ec message", ec.ECDSA(getattr(hashes, hashing.name.replace("_", ""))()))  # DER
    assert shown["Cryptographic Algorithm"] == enums.CryptographicAlgorithm.EC and shown["Cryptographic Length"] == bits
    assert refused.value.reason == enums.ResultReason.INVALID_FIELD and "ECDSA_SHA_" in str(refused.value)
    with kmip_server.admin() as rest:
        key = rest.get(f"/v1/keys/{private_uid}").json()
    assert key["algorithm"] == {256: "ECC_NIST_P256", 384: "ECC_NIST_P384", 521: "ECC_NIST_P521"}[bits]


def test_an_ed25519_key_pair_signs_in_the_hsm(kmip_server: KmipServer) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    with kmip_server.connected(OWNER) as client:
        public_uid, private_uid = client.create_key_pair(
            enums.CryptographicAlgorithm.ED25519, 256, public_usage_mask=SIGN, private_usage_mask=SIGN
        )
        client.activate(private_uid)
        signature = client.sign(b"edwards", uid=private_uid)
        public = serialization.load_der_public_key(client.get(public_uid).value)
    assert isinstance(public, ed25519.Ed25519PublicKey) and len(signature) == 64
    public.verify(signature, b"edwards")


def test_an_ecdh_key_pair_is_for_key_agreement_only(kmip_server: KmipServer) -> None:
    with kmip_server.connected(OWNER) as client:
        public_uid, private_uid = client.create_key_pair(enums.CryptographicAlgorithm.ECDH, 256)
        client.activate(private_uid)
        with pytest.raises(KmipOperationFailure) as signing:
            client.sign(b"x", uid=private_uid)
        assert client.get(public_uid).key_format_type == enums.KeyFormatType.X_509
        with pytest.raises(KmipOperationFailure) as curve:
            client.create_key_pair(enums.CryptographicAlgorithm.EC, 224)
    assert signing.value.reason in (enums.ResultReason.PERMISSION_DENIED, enums.ResultReason.INVALID_FIELD)
    assert curve.value.reason == enums.ResultReason.INVALID_FIELD and "EC-256, EC-384, EC-521" in str(curve.value)
    with kmip_server.admin() as rest:
        key = rest.get(f"/v1/keys/{private_uid}").json()
    assert (key["algorithm"], key["usage"]) == ("ECC_NIST_P256", "KEY_AGREEMENT")


def test_a_digital_signature_algorithm_names_the_padding_and_hash_it_signs_with(kmip_server: KmipServer) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    dsa = enums.DigitalSignatureAlgorithm
    with kmip_server.connected(OWNER) as client:
        rsa_public, rsa_private = client.create_key_pair(
            enums.CryptographicAlgorithm.RSA, 2048, public_usage_mask=SIGN, private_usage_mask=SIGN
        )
        ec_public, ec_private = client.create_key_pair(
            enums.CryptographicAlgorithm.EC, 256, public_usage_mask=SIGN, private_usage_mask=SIGN
        )
        client.activate(rsa_private)
        client.activate(ec_private)
        named = {"digital_signature_algorithm": dsa.SHA384_WITH_RSA_ENCRYPTION}
        rsa_signature = client.sign(b"named", uid=rsa_private, cryptographic_parameters=named)
        ec_signature = client.sign(
            b"named", uid=ec_private, cryptographic_parameters={"digital_signature_algorithm": dsa.ECDSA_WITH_SHA256}
        )
        refusals = []
        for uid, parameters in (
            (rsa_private, {"digital_signature_algorithm": dsa.ECDSA_WITH_SHA256}),
            (rsa_private, {"digital_signature_algorithm": dsa.SHA1_WITH_RSA_ENCRYPTION}),
            (rsa_private, {**named, "hashing_algorithm": enums.HashingAlgorithm.SHA_256}),
            (ec_private, {"digital_signature_algorithm": dsa.ECDSA_WITH_SHA384}),
            (ec_private, {"digital_signature_algorithm": dsa.SHA256_WITH_RSA_ENCRYPTION}),
        ):
            with pytest.raises(KmipOperationFailure) as refused:
                client.sign(b"x", uid=uid, cryptographic_parameters=parameters)
            refusals.append(refused.value.reason)
        rsa_key = serialization.load_der_public_key(client.get(rsa_public).value)
        ec_key = serialization.load_der_public_key(client.get(ec_public).value)
    assert isinstance(rsa_key, rsa.RSAPublicKey) and isinstance(ec_key, ec.EllipticCurvePublicKey)
    rsa_key.verify(rsa_signature, b"named", padding.PKCS1v15(), hashes.SHA384())  # the hash it named, not SHA-256
    ec_key.verify(ec_signature, b"named", ec.ECDSA(hashes.SHA256()))
    assert refusals == [enums.ResultReason.INVALID_FIELD] * 5
