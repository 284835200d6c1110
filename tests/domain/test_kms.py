"""The KMS API's vocabulary: key references, aliases, errors by AWS name, request fields."""

from __future__ import annotations

import pytest

from keymanager import errors
from keymanager.domain import access_keys, kms, kms_fields
from keymanager.domain.key_specs import SPECS, EncryptionAlgorithm, SigningAlgorithm

ACCOUNT = "111122223333"
KEY = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("ref", "native"),
    [
        (KEY, KEY),
        ("01234567-89ab-cdef-0123-456789abcdef", KEY),
        (f"arn:aws:kms:us-east-1:{ACCOUNT}:key/{KEY}", KEY),
        (f"arn:aws:kms:eu-west-3:{ACCOUNT}:key/01234567-89ab-cdef-0123-456789abcdef", KEY),
        ("alias/billing", "billing"),
        (f"arn:aws:kms:us-east-1:{ACCOUNT}:alias/billing", "billing"),
    ],
)
def test_key_references(ref: str, native: str) -> None:
    assert kms.resolve(ref, ACCOUNT) == native


@pytest.mark.parametrize(
    "ref",
    ["billing", KEY.upper(), KEY[:-1], f"arn:aws:kms:us-east-1:999999999999:key/{KEY}", "arn:aws:s3:::bucket", ""],
)
def test_other_references_are_not_found(ref: str) -> None:
    with pytest.raises(kms.KmsError) as refused:
        kms.resolve(ref, ACCOUNT)
    assert refused.value.code == "NotFoundException"


@pytest.mark.parametrize(
    ("alias", "code"),
    [
        ("alias/aws/s3", "NotAuthorizedException"),
        (f"alias/kms-{KEY}", "ValidationException"),
        ("alias/", "ValidationException"),
        ("alias/9starts-with-digit", "ValidationException"),
        ("alias/" + "a" * 129, "ValidationException"),
        ("billing", "ValidationException"),
    ],
)
def test_alias_names_refused(alias: str, code: str) -> None:
    with pytest.raises(kms.KmsError) as refused:
        kms.alias_name(alias)
    assert refused.value.code == code


def test_unaliased_names_are_not_aliases() -> None:
    name = kms.unaliased_name()
    assert name.startswith("kms-") and len(name) == 36
    with pytest.raises(kms.KmsError):
        kms.alias_name(f"alias/{name}")


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.DecryptionFailed(), "InvalidCiphertextException"),
        (errors.KeyNotFound(), "NotFoundException"),
        (errors.Forbidden(), "AccessDeniedException"),
        (errors.KeyDisabled(), "DisabledException"),
        (errors.KeyPendingDeletion(), "KMSInvalidStateException"),
        (errors.Conflict(), "KMSInvalidStateException"),
        (errors.InvalidRequest(), "ValidationException"),
        (errors.HsmUnavailable(), "DependencyTimeoutException"),
        (errors.KeyManagerError(), "KMSInternalException"),
    ],
)
def test_service_errors_by_aws_name(error: errors.KeyManagerError, code: str) -> None:
    assert kms.aws_error(error).code == code


def test_every_decryption_failure_has_one_message() -> None:
    assert kms.aws_error(errors.DecryptionFailed()).message == "Unable to decrypt the ciphertext"


def test_fields() -> None:
    assert kms_fields.blob({"P": "AAE="}, "P", low=1, high=4) == b"\x00\x01"
    for params, code in (
        ({"P": 1}, "SerializationException"),
        ({"P": "not base64!"}, "SerializationException"),
        ({"P": "AAAAAAAA"}, "ValidationException"),
        ({}, "ValidationException"),
    ):
        with pytest.raises(kms.KmsError) as refused:
            kms_fields.blob(params, "P", low=1, high=4)
        assert refused.value.code == code
    assert kms_fields.context({"EncryptionContext": {"a": "b"}}) == {"a": "b"}
    with pytest.raises(kms.KmsError):
        kms_fields.context({"EncryptionContext": {"a": 1}})
    with pytest.raises(kms.KmsError):
        kms_fields.context({"EncryptionContext": {"a": "b" * 8192}})
    with pytest.raises(kms.KmsError) as refused:
        kms_fields.check_common({"DryRun": True})
    assert refused.value.code == "UnsupportedOperationException"
    with pytest.raises(kms.KmsError) as refused:
        kms_fields.check_common({"Recipient": {"AttestationDocument": "AA=="}})
    assert refused.value.code == "UnsupportedOperationException"
    kms_fields.check_common({"EncryptionAlgorithm": "RSAES_OAEP_SHA_256", "GrantTokens": ["t"]})


def test_choice_of_aws_names() -> None:
    assert (
        kms_fields.choice({"A": "RSAES_OAEP_SHA_1"}, "A", EncryptionAlgorithm) is EncryptionAlgorithm.RSAES_OAEP_SHA_1
    )
    assert kms_fields.choice({}, "A", EncryptionAlgorithm) is None
    for value, code in (("RSAES_PKCS1", "ValidationException"), ("SM2PKE", "UnsupportedOperationException")):
        with pytest.raises(kms.KmsError) as refused:
            kms_fields.choice({"A": value}, "A", EncryptionAlgorithm)
        assert refused.value.code == code and (
            value in refused.value.message or "RSAES_OAEP_SHA_1" in refused.value.message
        )
    with pytest.raises(kms.KmsError) as refused:
        kms_fields.choice({}, "A", SigningAlgorithm, required=True)
    assert refused.value.code == "ValidationException"
    with pytest.raises(kms.KmsError) as refused:
        kms_fields.choice({"A": 3}, "A", SigningAlgorithm)
    assert refused.value.code == "SerializationException"


def test_every_kms_key_spec_is_a_row_of_the_table() -> None:
    for spec in SPECS.values():
        if spec.kms_spec is not None:
            assert kms.creatable(spec.kms_spec) is spec.algorithm
    assert kms.creatable("SM2") is None and kms.creatable("AES_256_GCM") is None


def test_generated_access_keys_have_the_documented_form() -> None:
    ids = {access_keys.new_access_key_id() for _ in range(100)}
    secrets = {access_keys.new_secret_access_key() for _ in range(100)}
    assert len(ids) == len(secrets) == 100
    assert all(access_keys.ACCESS_KEY_ID.fullmatch(i) and len(i) == 20 for i in ids)
    assert all(access_keys.SECRET_ACCESS_KEY.fullmatch(s) and len(s) == 40 for s in secrets)
