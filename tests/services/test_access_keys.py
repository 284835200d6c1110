"""Access keys in the service layer: sealed in the HSM, SigV4 authentication, revocation, bounds."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from keymanager.domain.kms import KmsError
from keymanager.domain.models import Algorithm, HsmObjects, Principal, Role
from keymanager.domain.sigv4 import Credential, ReceivedRequest
from keymanager.errors import DecryptionFailed
from keymanager.services.container import Services


def signed(key_id: str, secret: str, body: bytes = b"{}") -> ReceivedRequest:
    request = AWSRequest(
        method="POST",
        url="https://127.0.0.1:8443/",
        data=body,
        headers={"X-Amz-Target": "TrentService.ListKeys", "Content-Type": "application/x-amz-json-1.1"},
    )
    SigV4Auth(Credentials(key_id, secret), "kms", "eu-north-1").add_auth(request)
    headers = [*request.headers.items(), ("Host", "127.0.0.1:8443")]
    return ReceivedRequest("POST", "/", "", headers, body)


def authenticate(services: Services, request: ReceivedRequest, *, fresh: bool) -> tuple[Principal, Credential]:
    keys = services.cache.snapshot(fresh=fresh)
    return asyncio.run(services.access_keys.authenticate(keys, request, datetime.now(UTC)))


def test_authenticate_revoke_and_refuse(services: Services) -> None:
    services.principals.create("billing", Role.APP)
    key_id, secret, _ = services.access_keys.create("billing")
    principal, credential = authenticate(services, signed(key_id, secret), fresh=False)
    assert principal.name == "billing" and credential.region == "eu-north-1"
    with pytest.raises(KmsError) as refused:
        authenticate(services, signed(key_id, "x" * 40), fresh=False)
    assert refused.value.code == "InvalidSignatureException"
    services.access_keys.revoke("billing", key_id)
    with pytest.raises(KmsError) as refused:
        authenticate(services, signed(key_id, secret), fresh=True)
    assert refused.value.code == "UnrecognizedClientException"


def test_a_sealed_secret_is_bound_to_its_id(services: Services) -> None:
    services.principals.create("billing", Role.APP)
    first, secret, _ = services.access_keys.create("billing")
    second, _, _ = services.access_keys.create("billing")
    stored = services.access_keys._store.access_key(first)
    assert stored is not None and secret.encode() not in stored.sealed_secret
    wrap = HsmObjects(enc_label=stored.wrap_label, mac_label=None)
    head = f"km:access-key:{first}:".encode()
    assert (
        asyncio.run(services.hsm.adecrypt(wrap, Algorithm.AES_256_GCM, head, stored.sealed_secret, b""))
        == secret.encode()
    )
    with pytest.raises(DecryptionFailed):
        asyncio.run(
            services.hsm.adecrypt(
                wrap, Algorithm.AES_256_GCM, f"km:access-key:{second}:".encode(), stored.sealed_secret, b""
            )
        )


def test_unknown_ids_never_grow_the_cache(services: Services) -> None:
    before = services.cache.sizes()
    for number in range(30):
        with pytest.raises(KmsError) as refused:
            authenticate(services, signed(f"KMAK{number:016d}", "s" * 40), fresh=False)
        assert refused.value.code == "UnrecognizedClientException"
    assert services.cache.sizes() == before
