"""The AWS KMS API across two replicas on one PostgreSQL and one token: access keys and keys
made on one are used on the other, and a revocation on one applies on the other at once."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.replicas.conftest import Cluster, Node


def kms(node: Node, pair: dict[str, str]) -> Any:
    return boto3.client(
        "kms",
        endpoint_url=node.url,
        region_name="us-east-2",
        aws_access_key_id=pair["access_key_id"],
        aws_secret_access_key=pair["secret_access_key"],
        verify=str(node.ca),
        config=Config(retries={"max_attempts": 1}),
    )


def test_kms_across_replicas_and_revocation_at_once(cluster: Cluster) -> None:
    with cluster.admin(cluster.a) as admin:
        assert admin.post("/v1/principals", json={"name": "kms-replicas", "role": "admin"}).status_code == 201
        made = admin.post("/v1/principals/kms-replicas/access-keys", json={})
        assert made.status_code == 201
    pair = made.json()
    cluster.secrets.append(pair["secret_access_key"])
    on_a, on_b = kms(cluster.a, pair), kms(cluster.b, pair)
    key = on_b.create_key(Description="made on b")["KeyMetadata"]
    for _ in range(4):  # every worker of b caches the access key and its secret
        blob = on_a.encrypt(KeyId=key["Arn"], Plaintext=b"across")["CiphertextBlob"]
        assert on_b.decrypt(CiphertextBlob=blob)["Plaintext"] == b"across"
    with cluster.admin(cluster.a) as admin:
        revoked = admin.delete(f"/v1/principals/kms-replicas/access-keys/{pair['access_key_id']}")
        assert revoked.status_code == 204
    for _ in range(4):
        with pytest.raises(ClientError) as refused:
            on_b.decrypt(CiphertextBlob=blob)
        assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"
