"""Access keys in the service layer: sealed in the HSM, SigV4 authentication, revocation, bounds."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pkcs11 import Mechanism

from keymanager.domain.kms import KmsError
from keymanager.domain.models import Algorithm, Principal, Role
from keymanager.domain.sigv4 import Credential, ReceivedRequest
from keymanager.errors import DecryptionFailed, InvalidRequest
from keymanager.hsm.capabilities import Capabilities
from keymanager.services.access_keys import AccessKeyService, _sealing
from keymanager.services.container import Services

HOSTS = frozenset({"127.0.0.1:8443"})
"""The Host the requests of these tests are signed for (the test settings' listen address)."""


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
    scheme, wrap = _sealing(stored.wrap_label)
    head = f"km:access-key:{first}:".encode()
    assert asyncio.run(services.hsm.adecrypt(wrap, scheme, head, stored.sealed_secret, b"")) == secret.encode()
    with pytest.raises(DecryptionFailed):
        asyncio.run(services.hsm.adecrypt(wrap, scheme, f"km:access-key:{second}:".encode(), stored.sealed_secret, b""))


def test_sealing_follows_the_token_and_every_sealed_secret_keeps_opening(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token without CKM_AES_GCM (a fault injected into what the adapter read) seals with CBC-PAD and
    HMAC-SHA256 in the HSM; a secret sealed before under the token's best scheme still authenticates."""
    services.principals.create("billing", Role.APP)
    before_id, before_secret, _ = services.access_keys.create("billing")
    real = services.hsm.capabilities()
    lacking = Capabilities({m: i for m, i in real.mechanisms.items() if m is not Mechanism.AES_GCM}, real.trust_flags)
    monkeypatch.setattr(services.hsm._token, "_capabilities", lacking)
    fresh = AccessKeyService(services.access_keys._store, services.hsm, services.store.principal_by_name, HOSTS)
    key_id, secret, _ = fresh.create("billing")
    stored = fresh._store.access_key(key_id)
    assert stored is not None and stored.wrap_label.startswith("km/access-keys-cbc/")
    assert _sealing(stored.wrap_label)[0] is Algorithm.AES_256_CBC_HMAC_SHA256
    keys = services.cache.snapshot(fresh=True)
    for one, its_secret in ((key_id, secret), (before_id, before_secret)):
        principal, _ = asyncio.run(fresh.authenticate(keys, signed(one, its_secret), datetime.now(UTC)))
        assert principal.name == "billing"
    no_scheme = Capabilities(
        {m: i for m, i in lacking.mechanisms.items() if m is not Mechanism.AES_CBC_PAD}, real.trust_flags
    )
    monkeypatch.setattr(services.hsm._token, "_capabilities", no_scheme)
    with pytest.raises(InvalidRequest, match="CKM_AES_GCM"):
        AccessKeyService(services.access_keys._store, services.hsm, services.store.principal_by_name, HOSTS).create(
            "billing"
        )


def test_unknown_ids_never_grow_the_cache(services: Services) -> None:
    before = services.cache.sizes()
    for number in range(30):
        with pytest.raises(KmsError) as refused:
            authenticate(services, signed(f"KMAK{number:016d}", "s" * 40), fresh=False)
        assert refused.value.code == "UnrecognizedClientException"
    assert services.cache.sizes() == before
