"""keymanager's AWS External Key Store door (``docs/xks.md``), measured as AWS KMS would load it.

* A key store of its own (a principal of role ``xks`` with a random prefix and a generated access
  key) and an ``AES_256_GCM`` key it may encrypt and decrypt with, made over the admin REST API.
* wrk replaying one XKS ``Encrypt`` (the field size, an AAD as AWS KMS sends, a CDIV asked for),
  signed once with botocore's ``SigV4Auth(credentials, "kms-xks-proxy", region)``: at one
  connection and at the targets' high concurrency, p50 and p99 from wrk's latency quantiles. A
  signature stays valid five minutes at this door: each run signs again.

AWS KMS allows 1,800 requests/s per external key store by default and gives each call 250 ms; AWS
recommends at most 35 ms of round trip to the proxy, which is the budget the p99 is read against.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from bench import wrk
from bench.measure import Measurement, Window
from bench.probes import ServerProbe
from bench.service import Service

REGION = "eu-west-1"
SERVICE = "kms-xks-proxy"
P99_BUDGET_MS = 35.0
_AAD = b'{"aws:s3:arn":"arn:aws:s3:::bench-bucket/object"}'


@dataclass(frozen=True)
class KeyStore:
    """What a signed XKS request needs: the service, the store's prefix and credential, the key."""

    url: str
    prefix: str
    access_key_id: str
    secret_access_key: str
    key_id: str


def provision(service: Service) -> KeyStore:
    """A new key store with an access key, and a GCM key whose policy names it (admin REST)."""
    suffix = secrets.token_hex(4)
    name, prefix = f"bench-xks-{suffix}", f"bench/{suffix}"
    headers = {"Authorization": f"Bearer {service.admin_token}"}
    with httpx.Client(base_url=service.url, verify=service.ca or False, headers=headers, timeout=30) as admin:
        admin.post("/v1/principals", json={"name": name, "role": "xks", "xks_uri_prefix": prefix}).raise_for_status()
        pair = admin.post(f"/v1/principals/{name}/access-keys", json={})
        pair.raise_for_status()
        policy = {"encrypt": [name], "decrypt": [name]}
        key = admin.post("/v1/keys", json={"name": name, "algorithm": "AES_256_GCM", "policy": policy})
        key.raise_for_status()
    return KeyStore(
        service.url, prefix, pair.json()["access_key_id"], pair.json()["secret_access_key"], key.json()["id"]
    )


def signed_encrypt(store: KeyStore, plaintext: bytes) -> str:
    """The wrk script of one XKS ``Encrypt`` of ``plaintext``, signed now."""
    path = f"/{store.prefix}/kms/xks/v1/keys/{store.key_id}/encrypt"
    body = json.dumps(
        {
            "requestMetadata": {
                "awsPrincipalArn": "arn:aws:iam::111122223333:role/bench",
                "kmsKeyArn": "arn:aws:kms:eu-west-1:111122223333:key/bench",
                "kmsOperation": "GenerateDataKey",
                "kmsRequestId": "bench",
                "kmsViaService": "s3",
            },
            "plaintext": base64.b64encode(plaintext).decode(),
            "additionalAuthenticatedData": base64.b64encode(_AAD).decode(),
            "encryptionAlgorithm": "AES_GCM",
            "ciphertextDataIntegrityValueAlgorithm": "SHA_256",
        }
    )
    request = AWSRequest(
        method="POST", url=store.url + path, data=body.encode(), headers={"Content-Type": "application/json"}
    )
    SigV4Auth(Credentials(store.access_key_id, store.secret_access_key), SERVICE, REGION).add_auth(request)
    return wrk.lua(path, body, dict(request.headers.items()))


def encrypt_wrk(store: KeyStore, plaintext: bytes, connections: int, window: Window, probe: ServerProbe) -> Measurement:
    """wrk replaying one signed XKS ``Encrypt`` at ``connections`` (warm-up, then measured)."""
    script = signed_encrypt(store, plaintext)
    warm = script if window.warmup >= 0.5 else None
    run = wrk.Run("km-xks", "keymanager XKS Encrypt [wrk, one signed request]", len(plaintext), connections)
    return wrk.measure_lua(store.url, script, warm, run, window, probe)
