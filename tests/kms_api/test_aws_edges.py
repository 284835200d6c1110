"""AWS KMS's edges as unmodified boto3 meets them on the real server (issue 37, item 3): key ARNs and
alias ARNs wherever a key is named, aliases that target keys only, ListKeyRotations' pages and its
answer for a new key, Encrypt's plaintext bounds in AWS's words, the configured account and the
region's partition in every ARN, and multi-Region keys refused by name."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.e2e.conftest import Server
from tests.kms_api.conftest import ACCOUNT, REGION, KmsFactory, Pair, new_pair

NOT_AN_ALIAS = "Aliases must refer to keys. Not aliases"


def refused(call: Callable[[], Any]) -> tuple[str, str]:
    """The AWS error code and message of a call that must fail."""
    with pytest.raises(ClientError) as error:
        call()
    return str(error.value.response["Error"]["Code"]), str(error.value.response["Error"]["Message"])


# -- aliases and ARNs ----------------------------------------------------------------------------


def test_an_alias_targets_a_key_id_or_key_arn_never_an_alias(admin_kms: Any) -> None:
    first, second = (admin_kms.create_key()["KeyMetadata"] for _ in range(2))
    admin_kms.create_alias(AliasName="alias/edge-by-arn", TargetKeyId=first["Arn"])
    assert admin_kms.describe_key(KeyId="alias/edge-by-arn")["KeyMetadata"]["KeyId"] == first["KeyId"]
    admin_kms.update_alias(AliasName="alias/edge-by-arn", TargetKeyId=second["Arn"])
    assert admin_kms.describe_key(KeyId="alias/edge-by-arn")["KeyMetadata"]["KeyId"] == second["KeyId"]
    admin_kms.update_alias(AliasName="alias/edge-by-arn", TargetKeyId=first["KeyId"])
    assert admin_kms.describe_key(KeyId="alias/edge-by-arn")["KeyMetadata"]["KeyId"] == first["KeyId"]
    alias_arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:alias/edge-by-arn"
    for target in ("alias/edge-by-arn", alias_arn):
        assert refused(lambda t=target: admin_kms.update_alias(AliasName="alias/edge-by-arn", TargetKeyId=t)) == (
            "ValidationException",
            NOT_AN_ALIAS,
        )
        assert refused(lambda t=target: admin_kms.create_alias(AliasName="alias/edge-other", TargetKeyId=t)) == (
            "ValidationException",
            NOT_AN_ALIAS,
        )
    assert admin_kms.describe_key(KeyId="alias/edge-by-arn")["KeyMetadata"]["KeyId"] == first["KeyId"]
    assert refused(lambda: admin_kms.describe_key(KeyId="alias/edge-other"))[0] == "NotFoundException"


def test_every_operation_on_a_key_takes_its_arn_and_its_alias_arns(admin_kms: Any) -> None:
    """Key ARN, alias, alias ARN (the ListAliases one, and the same alias in another region of the
    account) name one key for every operation that takes a key."""
    key = admin_kms.create_key()["KeyMetadata"]
    mac = admin_kms.create_key(KeySpec="HMAC_256", KeyUsage="GENERATE_VERIFY_MAC")["KeyMetadata"]
    signer = admin_kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]
    for made, name in ((key, "edge-everywhere"), (mac, "edge-mac"), (signer, "edge-signer")):
        admin_kms.create_alias(AliasName=f"alias/{name}", TargetKeyId=made["KeyId"])
    listed = admin_kms.list_aliases(KeyId=key["KeyId"])["Aliases"]
    assert [a["AliasArn"] for a in listed] == [f"arn:aws:kms:{REGION}:{ACCOUNT}:alias/edge-everywhere"]

    def refs(made: dict[str, Any], name: str) -> list[str]:
        arns = [f"arn:aws:kms:{region}:{ACCOUNT}:alias/{name}" for region in (REGION, "us-east-2")]
        return [made["Arn"], f"alias/{name}", *arns]

    blob = admin_kms.encrypt(KeyId=key["KeyId"], Plaintext=b"named four ways")["CiphertextBlob"]
    for ref in refs(key, "edge-everywhere"):
        assert admin_kms.describe_key(KeyId=ref)["KeyMetadata"]["Arn"] == key["Arn"], ref
        assert admin_kms.encrypt(KeyId=ref, Plaintext=b"p")["KeyId"] == key["Arn"], ref
        assert admin_kms.decrypt(KeyId=ref, CiphertextBlob=blob)["Plaintext"] == b"named four ways", ref
        made = admin_kms.generate_data_key(KeyId=ref, KeySpec="AES_256")
        assert made["KeyId"] == key["Arn"] and admin_kms.decrypt(CiphertextBlob=made["CiphertextBlob"])["Plaintext"]
        assert admin_kms.generate_data_key_without_plaintext(KeyId=ref, NumberOfBytes=16)["KeyId"] == key["Arn"]
        again = admin_kms.re_encrypt(CiphertextBlob=blob, SourceKeyId=ref, DestinationKeyId=ref)
        assert (again["SourceKeyId"], again["KeyId"]) == (key["Arn"], key["Arn"]), ref
        assert admin_kms.get_key_rotation_status(KeyId=ref)["KeyId"] == key["Arn"], ref
        assert admin_kms.list_key_rotations(KeyId=ref)["Rotations"] == [], ref
        assert json.loads(admin_kms.get_key_policy(KeyId=ref, PolicyName="default")["Policy"])["Statement"], ref
    for ref in refs(mac, "edge-mac"):
        tag = admin_kms.generate_mac(KeyId=ref, Message=b"m", MacAlgorithm="HMAC_SHA_256")
        assert tag["KeyId"] == mac["Arn"], ref
        checked = admin_kms.verify_mac(KeyId=ref, Message=b"m", Mac=tag["Mac"], MacAlgorithm="HMAC_SHA_256")
        assert checked["MacValid"] is True, ref
    for ref in refs(signer, "edge-signer"):
        signed = admin_kms.sign(KeyId=ref, Message=b"m", SigningAlgorithm="ECDSA_SHA_256")
        assert signed["KeyId"] == signer["Arn"], ref
        verified = admin_kms.verify(
            KeyId=ref, Message=b"m", Signature=signed["Signature"], SigningAlgorithm="ECDSA_SHA_256"
        )
        assert verified["SignatureValid"] is True, ref
        assert admin_kms.get_public_key(KeyId=ref)["KeyId"] == signer["Arn"], ref


# -- ListKeyRotations --------------------------------------------------------------------------------


def test_list_key_rotations_of_a_new_key_then_in_pages(kms_client: KmsFactory, admin_pair: Pair) -> None:
    admin_kms = kms_client(admin_pair, parameter_validation=False)  # the server's own bounds, not boto3's
    key = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    fresh = admin_kms.list_key_rotations(KeyId=key)
    assert (fresh["Rotations"], fresh["Truncated"], "NextMarker" in fresh) == ([], False, False)
    for _ in range(3):
        admin_kms.rotate_key_on_demand(KeyId=key)
    every = [r["RotationDate"] for r in admin_kms.list_key_rotations(KeyId=key)["Rotations"]]
    first = admin_kms.list_key_rotations(KeyId=key, Limit=1)
    assert (len(first["Rotations"]), first["Truncated"]) == (1, True) and first["NextMarker"]
    rest = admin_kms.list_key_rotations(KeyId=key, Limit=2, Marker=first["NextMarker"])
    assert (len(rest["Rotations"]), rest["Truncated"], "NextMarker" in rest) == (2, False, False)
    assert [r["RotationDate"] for r in first["Rotations"] + rest["Rotations"]] == every and len(every) == 3
    exact = admin_kms.list_key_rotations(KeyId=key, Limit=3)
    assert (len(exact["Rotations"]), exact["Truncated"], "NextMarker" in exact) == (3, False, False)
    for limit in (0, 1001):
        assert refused(lambda n=limit: admin_kms.list_key_rotations(KeyId=key, Limit=n))[0] == "ValidationException"
    for marker in ("not-ours", "-1"):
        assert refused(lambda m=marker: admin_kms.list_key_rotations(KeyId=key, Marker=m))[0] == (
            "InvalidMarkerException"
        )


# -- Encrypt's plaintext bounds ----------------------------------------------------------------------


def test_encrypt_takes_1_to_4096_bytes_and_refuses_others_in_awss_words(admin_kms: Any) -> None:
    """As AWS answers (botocore's model: ``PlaintextType`` min 1, max 4096; boto3 sends both)."""
    key = admin_kms.create_key()["KeyMetadata"]["KeyId"]
    for size in (1, 4096):
        blob = admin_kms.encrypt(KeyId=key, Plaintext=b"p" * size)["CiphertextBlob"]
        assert admin_kms.decrypt(CiphertextBlob=blob)["Plaintext"] == b"p" * size
    prefix = "1 validation error detected: Value at 'plaintext' failed to satisfy constraint: Member must have length"
    assert refused(lambda: admin_kms.encrypt(KeyId=key, Plaintext=b"")) == (
        "ValidationException",
        f"{prefix} greater than or equal to 1",
    )
    secret = b"4111111111111111" * 257  # 4,112 bytes
    code, message = refused(lambda: admin_kms.encrypt(KeyId=key, Plaintext=secret))
    assert (code, message) == ("ValidationException", f"{prefix} less than or equal to 4096")
    assert "4111" not in message and base64.b64encode(secret[:12]).decode() not in message


# -- multi-Region keys ---------------------------------------------------------------------------------


def test_multi_region_keys_are_refused_by_name_and_reason(admin_kms: Any) -> None:
    before = {k["KeyId"] for k in admin_kms.list_keys(Limit=1000)["Keys"]}
    key = admin_kms.create_key(MultiRegion=False)["KeyMetadata"]
    assert key["MultiRegion"] is False and not key["KeyId"].startswith("mrk-")
    for call, name in (
        (lambda: admin_kms.create_key(MultiRegion=True), "MultiRegion"),
        (lambda: admin_kms.replicate_key(KeyId=key["KeyId"], ReplicaRegion="eu-central-1"), "ReplicateKey"),
        (lambda: admin_kms.update_primary_region(KeyId=key["KeyId"], PrimaryRegion="us-east-1"), "UpdatePrimaryRegion"),
    ):
        code, message = refused(call)
        assert code == "UnsupportedOperationException", name
        assert message.startswith(f"{name} is not supported by this service: ") and "never leaves" in message, message
    after = {k["KeyId"] for k in admin_kms.list_keys(Limit=1000)["Keys"]}
    assert after - before == {key["KeyId"]}  # the refused CreateKey made nothing


# -- the account and the partition -----------------------------------------------------------------------

OTHER_ACCOUNT = "123456789012"
PARTITIONS = {"eu-west-1": "aws", "cn-north-1": "aws-cn", "us-gov-west-1": "aws-us-gov"}


@pytest.fixture(scope="module")
def other_account(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own whose ARNs name account :data:`OTHER_ACCOUNT` (``KM_AWS_ACCOUNT_ID``)."""
    from tests.e2e.conftest import running_server

    with running_server(tmp_path_factory.mktemp("account"), workers=1, KM_AWS_ACCOUNT_ID=OTHER_ACCOUNT) as started:
        yield started


def kms_in(server: Server, pair: Pair, region: str) -> Any:
    return boto3.client(
        "kms",
        endpoint_url=server.url,
        region_name=region,
        aws_access_key_id=pair.access_key_id,
        aws_secret_access_key=pair.secret_access_key,
        verify=str(server.ca),
        config=Config(retries={"max_attempts": 1}),
    )


@pytest.mark.parametrize(("region", "partition"), PARTITIONS.items())
def test_arns_name_the_configured_account_and_the_regions_partition(
    other_account: Server, region: str, partition: str
) -> None:
    pair = new_pair(other_account, f"admin-{partition}", "admin")
    kms = kms_in(other_account, pair, region)
    key = kms.create_key()["KeyMetadata"]
    arn = f"arn:{partition}:kms:{region}:{OTHER_ACCOUNT}:key/{key['KeyId']}"
    assert (key["Arn"], key["AWSAccountId"]) == (arn, OTHER_ACCOUNT)
    kms.create_alias(AliasName=f"alias/edge-{partition}", TargetKeyId=arn)
    alias_arn = f"arn:{partition}:kms:{region}:{OTHER_ACCOUNT}:alias/edge-{partition}"
    assert [a["AliasArn"] for a in kms.list_aliases(KeyId=arn)["Aliases"]] == [alias_arn]
    assert kms.encrypt(KeyId=alias_arn, Plaintext=b"p")["KeyId"] == arn
    assert kms.generate_data_key(KeyId=alias_arn, KeySpec="AES_256")["KeyId"] == arn
    assert {"KeyId": key["KeyId"], "KeyArn": arn} in kms.list_keys(Limit=1000)["Keys"]
    policy = json.loads(kms.get_key_policy(KeyId=arn, PolicyName="default")["Policy"])
    users = {user for statement in policy["Statement"] for user in statement["Principal"]["AWS"]}
    assert users == {f"arn:{partition}:iam::{OTHER_ACCOUNT}:user/admin-{partition}"}
    kms.put_key_policy(KeyId=arn, PolicyName="default", Policy=json.dumps(policy))  # it reads back
    foreign = "aws-cn" if partition != "aws-cn" else "aws"
    elsewhere = json.dumps(policy).replace(f"arn:{partition}:iam::", f"arn:{foreign}:iam::")
    assert refused(lambda: kms.put_key_policy(KeyId=arn, PolicyName="default", Policy=elsewhere))[0] == (
        "MalformedPolicyDocumentException"
    )
    for wrong in (
        arn.replace(OTHER_ACCOUNT, ACCOUNT),  # another account
        arn.replace(f"arn:{partition}:", f"arn:{foreign}:"),  # a partition the region is not in
    ):
        assert refused(lambda w=wrong: kms.describe_key(KeyId=w))[0] == "NotFoundException", wrong
