"""Asymmetric keys through both doors, measured against SoftHSM's own sign rate (issue 22).

* Keys of the bench principal, made over the admin SDK: ``RSA_2048`` and ``ECC_NIST_P256`` with
  usage ``SIGN_VERIFY``, and an ``ECC_NIST_P256`` ``KEY_AGREEMENT`` key (rights ``sign``,
  ``verify``, ``get_public_key``, ``derive_shared_secret``).
* Sign rows (``SIGNERS``: RSA-2048 ``RSASSA_PSS_SHA_256``, P-256 ``ECDSA_SHA_256``), a 1 KB RAW
  message — the message ``ceilings``' ``SIGN_CEILINGS`` sign: wrk replaying one native ``POST
  /v1/keys/{key}/sign`` and one SigV4-signed KMS ``Sign`` (as ``bench.kmsdoor`` replays
  ``Encrypt``), at the targets' high concurrency. Before either run one signature of the door is
  verified with ``cryptography`` against the key's public key (wrk reads no bodies). A KMS door
  that does not answer ``Sign`` is reported as such (``door_refusal``) instead of measured.
* One SDK client, one call at a time (``bench.sequential``): ``verify`` of a signature,
  ``get_public_key``, ``derive_shared_secret`` with a peer key made here; every answer checked
  untimed (the verdict True; the public key equal to the first one; the secret equal to the one
  ``cryptography`` derives from the peer's private key and the key's public key).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from dataclasses import dataclass, replace
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from keymanager_sdk import KeyManager, Policy, PublicKey

from bench import ceilings, sequential, wrk
from bench.aws import DUMMY_PAIR, AwsConfig
from bench.measure import Measurement, Window
from bench.probes import ServerProbe
from bench.service import Endpoint, Service
from bench.stats import Distribution

MESSAGE_BYTES = ceilings.FIELD_BYTES


@dataclass(frozen=True)
class Signer:
    """A sign row: the key spec, the algorithm, and the ceiling (``ceilings.SIGN_CEILINGS``) it is judged against."""

    spec: str
    algorithm: str
    ceiling: str
    title: str


SIGNERS = (
    Signer("RSA_2048", "RSASSA_PSS_SHA_256", "rsa_2048_pss_sign", "RSA-2048 PSS"),
    Signer("ECC_NIST_P256", "ECDSA_SHA_256", "ecdsa_p256_sign", "ECDSA P-256"),
)
SEQUENTIAL = ("verify", "get_public_key", "derive_shared_secret")


@dataclass(frozen=True)
class Keys:
    """The keys made for the bench principal: one per signer (by ceiling name) and one for ECDH."""

    signing: dict[str, str]
    agreement: str


def provision(service: Service, endpoint: Endpoint) -> Keys:
    """The signing keys and the key-agreement key, their policy naming the endpoint's principal."""
    assert endpoint.principal is not None
    users = (endpoint.principal,)
    rights = Policy(sign=users, verify=users, get_public_key=users, derive_shared_secret=users)
    suffix = secrets.token_hex(4)
    with KeyManager(service.url, token=service.admin_token, ca=service.ca) as admin:
        signing = {
            s.ceiling: admin.create_key(f"bench-{s.ceiling}-{suffix}", s.spec, policy=rights, usage="SIGN_VERIFY").id
            for s in SIGNERS
        }
        agreement = admin.create_key(f"bench-ecdh-{suffix}", "ECC_NIST_P256", policy=rights, usage="KEY_AGREEMENT")
    return Keys(signing, agreement.id)


def check_signature(public: PublicKey, signer: Signer, message: bytes, signature: bytes) -> None:
    """Raise (``cryptography``'s ``InvalidSignature``) unless ``signature`` is valid for ``message``."""
    loaded = public.load()
    if isinstance(loaded, rsa.RSAPublicKey):
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.AUTO)
        loaded.verify(signature, message, pss, hashes.SHA256())
    elif isinstance(loaded, ec.EllipticCurvePublicKey):
        loaded.verify(signature, message, ec.ECDSA(hashes.SHA256()))
    else:
        raise TypeError(f"{signer.spec}: an unexpected public key {type(loaded).__name__}")


# -- native and KMS door sign, wrk -------------------------------------------------------------
def native_script(endpoint: Endpoint, key: str, signer: Signer, message: bytes) -> str:
    """The wrk script of one native sign of ``message``; one signature checked first."""
    with endpoint.client() as km:
        check_signature(km.get_public_key(key), signer, message, km.sign(key, message, signer.algorithm).signature)
    body = json.dumps({"message": base64.b64encode(message).decode(), "message_type": "RAW",
                       "algorithm": signer.algorithm})  # fmt: skip
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {endpoint.token}"}
    return wrk.lua(f"/v1/keys/{key}/sign", body, headers)


def door_sign_body(key: str, signer: Signer, message: bytes) -> dict[str, str]:
    """The JSON body of the KMS ``Sign`` of ``message`` (as boto3 sends it: blobs in base64)."""
    return {"KeyId": key, "Message": base64.b64encode(message).decode(), "MessageType": "RAW",
            "SigningAlgorithm": signer.algorithm}  # fmt: skip


def door_refusal(door: AwsConfig, endpoint: Endpoint, key: str, signer: Signer, message: bytes) -> str | None:
    """None when the KMS door signs ``message`` with a signature ``cryptography`` verifies; else
    what the door answered (e.g. ``UnsupportedOperationException``), so the row says so."""
    client = door.client()
    try:
        answer = client.sign(KeyId=key, Message=message, MessageType="RAW", SigningAlgorithm=signer.algorithm)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".strip()
    finally:
        client.close()
    with endpoint.client() as km:
        check_signature(km.get_public_key(key), signer, message, bytes(answer["Signature"]))
    return None


def door_script(door: AwsConfig, key: str, signer: Signer, message: bytes) -> str:
    """The wrk script of one KMS ``Sign`` signed now with the door's access key (valid 15 minutes)."""
    assert door.endpoint_url is not None
    body = json.dumps(door_sign_body(key, signer, message))
    request = AWSRequest(
        method="POST",
        url=door.endpoint_url + "/",
        data=body.encode(),
        headers={"X-Amz-Target": "TrentService.Sign", "Content-Type": "application/x-amz-json-1.1"},
    )
    SigV4Auth(Credentials(*(door.credentials or DUMMY_PAIR)), "kms", door.region).add_auth(request)
    return wrk.lua("/", body, dict(request.headers.items()))


def sign_wrk(url: str, script: str, label: str, connections: int, window: Window, probe: ServerProbe) -> Measurement:
    """wrk replaying one sign request at ``connections`` (warm-up with the same request, then measured)."""
    warm = script if window.warmup >= 0.5 else None
    run = wrk.Run("km-sign", f"{label} [wrk, one request]", MESSAGE_BYTES, connections, "sign")
    return wrk.measure_lua(url, script, warm, run, window, probe)


# -- one SDK client ----------------------------------------------------------------------------
def sdk_calls(km: KeyManager, keys: Keys) -> dict[str, sequential.Call]:
    """``SEQUENTIAL``'s operations on the P-256 keys, each with the (untimed) check of its answer."""
    signer = SIGNERS[1]
    key, message = keys.signing[signer.ceiling], os.urandom(MESSAGE_BYTES)
    signature = km.sign(key, message, signer.algorithm)
    first = km.get_public_key(key)
    check_signature(first, signer, message, signature.signature)
    peer = ec.generate_private_key(ec.SECP256R1())
    agreement_public = km.get_public_key(keys.agreement).load()
    assert isinstance(agreement_public, ec.EllipticCurvePublicKey)
    expected = peer.exchange(ec.ECDH(), agreement_public)

    def verified(answer: object) -> bool:
        return answer is True

    def same_key(answer: object) -> bool:
        return isinstance(answer, PublicKey) and answer.der == first.der

    def shared(answer: object) -> bool:
        return getattr(answer, "secret", None) == expected

    return {
        "verify": (lambda: km.verify(key, message, signature, signer.algorithm), verified),
        "get_public_key": (lambda: km.get_public_key(key), same_key),
        "derive_shared_secret": (lambda: km.derive_shared_secret(keys.agreement, peer.public_key()), shared),
    }


# -- the rows of ``targets`` -------------------------------------------------------------------
@dataclass
class SignRuns:
    """What ``targets`` measures of asymmetric keys: its named measurements and the door's refusals."""

    measurements: dict[str, Measurement]
    door_refusals: dict[str, str]

    def informational(self, echo_cpu_us: float | None) -> dict[str, Any]:
        """p50 of the SDK calls, the door's refusals, and the service CPU per sign over the raw echo's."""
        found: dict[str, Any] = {"door_refusals": dict(self.door_refusals)}
        for name in SEQUENTIAL:
            m = self.measurements[f"{name}_sdk"]
            found[f"{name}_p50_ms"] = Distribution.of(m.encrypt).p50 * 1e3 if m.encrypt else None
        for signer in SIGNERS:
            cpu = self.measurements[f"sign_native_{signer.ceiling}"].server_cpu_us_per_request
            found[f"{signer.ceiling}_cpu_us"] = cpu
            found[f"{signer.ceiling}_cpu_over_echo"] = cpu / echo_cpu_us if cpu and echo_cpu_us else None
        return found


def measure_all(
    service: Service,
    endpoint: Endpoint,
    door: AwsConfig,
    connections: int,
    window: Window,
    probe: ServerProbe,
) -> SignRuns:
    """Every sign row and SDK latency (see the module), on keys made here."""
    keys = provision(service, endpoint)
    message = os.urandom(MESSAGE_BYTES)
    done: dict[str, Measurement] = {}
    refusals: dict[str, str] = {}
    for signer in SIGNERS:
        key = keys.signing[signer.ceiling]
        script = native_script(endpoint, key, signer, message)
        label = f"keymanager REST sign {signer.title}"
        done[f"sign_native_{signer.ceiling}"] = sign_wrk(endpoint.url, script, label, connections, window, probe)
        refused = door_refusal(door, endpoint, key, signer, message)
        if refused is not None:
            refusals[signer.ceiling] = refused
            continue
        script = door_script(replace(door, key_id=key), key, signer, message)
        label = f"km-kms-api Sign {signer.title}"
        done[f"sign_kms_{signer.ceiling}"] = sign_wrk(endpoint.url, script, label, connections, window, probe)
    with endpoint.client() as km:
        calls = sdk_calls(km, keys)
        for name in SEQUENTIAL:
            done[f"{name}_sdk"] = sequential.measure_sequential(name, calls[name], MESSAGE_BYTES, window, probe)
    return SignRuns(done, refusals)
