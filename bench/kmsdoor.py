"""keymanager's AWS KMS API door, measured on equal terms with the emulator.

* ``km-kms-api``: the same boto3 code as ``aws-kms`` (``bench.clients.AwsField``), pointed at the
  service's KMS door with an access key of the bench principal (``POST
  /v1/principals/{name}/access-keys``) and the service's CA bundle, on an ``AES_256_GCM`` key (what a
  KMS ``SYMMETRIC_DEFAULT`` key is).
* One driver for both sides: wrk replaying one ``Encrypt`` signed once with botocore's ``SigV4Auth``
  (a signature stays valid 15 minutes; each run signs again) — against the emulator (moto ignores
  signatures, but the key must exist there) and against the service, the same plaintext and shape
  of body, the same connections.
* Native REST against the KMS door: the REST encrypt of the same plaintext under the same key, wrk,
  same connections; the service's CPU per answered request of each.
"""

from __future__ import annotations

import base64
import json
import secrets

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from keymanager_sdk import KeyManager, Policy

from bench import wrk
from bench.aws import DUMMY_PAIR, EMULATOR_REGION, AwsConfig
from bench.measure import Measurement, Window
from bench.probes import ServerProbe
from bench.service import Endpoint, Service

REGION = EMULATOR_REGION
"""The region both sides are signed for (the emulator keeps its keys per region)."""


def provision_door(service: Service, endpoint: Endpoint) -> AwsConfig:
    """An ``AES_256_GCM`` key for the endpoint's principal and an access key of that principal: the
    boto3 config of ``km-kms-api``."""
    assert endpoint.principal is not None
    name = f"bench-gcm-{secrets.token_hex(4)}"
    users = (endpoint.principal,)
    with KeyManager(service.url, token=service.admin_token, ca=service.ca) as admin:
        policy = Policy(encrypt=users, decrypt=users, generate_data_key=users, reencrypt=users)
        key = admin.create_key(name, algorithm="AES_256_GCM", policy=policy)
    with httpx.Client(base_url=service.url, verify=service.ca or False, timeout=30) as admin_http:
        answer = admin_http.post(
            f"/v1/principals/{endpoint.principal}/access-keys",
            json={},
            headers={"Authorization": f"Bearer {service.admin_token}"},
        )
    answer.raise_for_status()
    pair = (answer.json()["access_key_id"], answer.json()["secret_access_key"])
    return AwsConfig(endpoint_url=service.url, region=REGION, key_id=key.id, credentials=pair, ca=service.ca)


def signed_encrypt(config: AwsConfig, plaintext: bytes) -> str:
    """The wrk script of one ``Encrypt`` of ``plaintext`` under ``config``'s key, signed now."""
    assert config.endpoint_url is not None
    body = json.dumps({"KeyId": config.key_id, "Plaintext": base64.b64encode(plaintext).decode()})
    request = AWSRequest(
        method="POST",
        url=config.endpoint_url + "/",
        data=body.encode(),
        headers={"X-Amz-Target": "TrentService.Encrypt", "Content-Type": "application/x-amz-json-1.1"},
    )
    SigV4Auth(Credentials(*(config.credentials or DUMMY_PAIR)), "kms", config.region).add_auth(request)
    return wrk.lua("/", body, dict(request.headers.items()))


def rest_encrypt(endpoint: Endpoint, key: str, plaintext: bytes) -> str:
    """The wrk script of the native REST encrypt of ``plaintext`` under ``key``."""
    body = json.dumps({"plaintext": base64.b64encode(plaintext).decode()})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {endpoint.token}"}
    return wrk.lua(f"/v1/keys/{key}/encrypt", body, headers)


def kms_encrypt_wrk(
    config: AwsConfig, plaintext: bytes, connections: int, window: Window, probe: ServerProbe, label: str
) -> Measurement:
    """wrk replaying one signed ``Encrypt`` against ``config``'s endpoint (warm-up, then measured)."""
    assert config.endpoint_url is not None
    script = signed_encrypt(config, plaintext)
    warm = script if window.warmup >= 0.5 else None
    run = wrk.Run("kms-encrypt", f"{label} [wrk, one signed Encrypt]", len(plaintext), connections)
    return wrk.measure_lua(config.endpoint_url, script, warm, run, window, probe)


def rest_encrypt_wrk(
    endpoint: Endpoint, key: str, plaintext: bytes, connections: int, window: Window, probe: ServerProbe
) -> Measurement:
    """wrk replaying the native REST encrypt of the same plaintext under the same key."""
    script = rest_encrypt(endpoint, key, plaintext)
    warm = script if window.warmup >= 0.5 else None
    run = wrk.Run("km", "keymanager REST encrypt [wrk]", len(plaintext), connections)
    return wrk.measure_lua(endpoint.url, script, warm, run, window, probe)
