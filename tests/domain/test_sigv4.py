"""SigV4 verification against botocore's signer: the same canonical request on thousands of
generated requests, every signature botocore makes verifies, and every change to a signed part
is refused with the AWS error a client expects."""

from __future__ import annotations

import dataclasses
import random
import string
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from keymanager.domain import sigv4
from keymanager.domain.sigv4 import ReceivedRequest, SignatureRefused

KEY_ID = "AKIAKEYMANAGERTEST01"
SECRET = "s3cr3t/Secret+Key/0123456789abcdefghijklmn"
SEGMENT_CHARS = string.ascii_letters + string.digits + "-_.~ %+=!*'()@:,;é/"
HEADER_CHARS = string.ascii_letters + string.digits + " \t-_.:/;=,"
HOSTS = frozenset({"kms.example.test:8443", "127.0.0.1:8443"})


def _signed(
    method: str, url: str, headers: dict[str, str], body: bytes, when: datetime, region: str = "eu-west-1"
) -> tuple[AWSRequest, str]:
    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    signer = SigV4Auth(Credentials(KEY_ID, SECRET), "kms", region)
    request.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
    signer._modify_request_before_signing(request)
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    signer._inject_signature_to_request(request, signature)
    return request, canonical


def _received(request: AWSRequest) -> ReceivedRequest:
    parts = urlsplit(request.url)
    headers = [(name, value) for name, value in request.headers.items()]
    if "host" not in {name.lower() for name, _ in headers}:
        headers.append(("host", parts.netloc))
    body = request.body if isinstance(request.body, bytes) else (request.body or "").encode()
    return ReceivedRequest(request.method, parts.path, parts.query, headers, body)


def _random_request(rng: random.Random) -> tuple[str, str, dict[str, str], bytes]:
    method = rng.choice(["GET", "POST", "PUT", "DELETE", "post"])
    segments = ["".join(rng.choice(SEGMENT_CHARS) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(0, 4))]
    segments += rng.sample([".", "..", "", "a"], k=rng.randint(0, 2))
    path = "/" + "/".join(quote(s, safe="/") for s in segments) + rng.choice(["", "/"])
    query = "&".join(
        f"{quote(rng.choice(['b', 'a', 'X-Y', 'z~']), safe='-_.~')}="
        f"{quote(''.join(rng.choice(SEGMENT_CHARS) for _ in range(rng.randint(0, 6))), safe='-_.~')}"
        for _ in range(rng.randint(0, 3))
    )
    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "TrentService." + rng.choice(["Encrypt", "Decrypt", "ListKeys"]),
    }
    for index in range(rng.randint(0, 4)):
        value = "".join(rng.choice(HEADER_CHARS) for _ in range(rng.randint(1, 20)))
        headers[f"X-Amz-Meta-{index}{rng.choice(['a', 'B'])}"] = value
    body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
    url = "https://kms.example.test:8443" + path + (f"?{query}" if query else "")
    return method, url, headers, body


def test_canonical_request_equals_botocores_on_3000_generated_requests() -> None:
    rng = random.Random(20261130)
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    for _ in range(3000):
        method, url, headers, body = _random_request(rng)
        request, expected = _signed(method, url, headers, body, now)
        received = _received(request)
        credential = sigv4.parse(received, service="kms", hosts=HOSTS, now=now)
        assert sigv4.canonical_request(received, credential.signed_headers) == expected, url
        sigv4.verify(received, credential, SECRET)


def test_a_real_boto3_style_request_verifies_and_names_its_scope() -> None:
    now = datetime.now(UTC)
    request, _ = _signed("POST", "https://127.0.0.1:8443/", {"X-Amz-Target": "TrentService.ListKeys"}, b"{}", now)
    credential = sigv4.parse(_received(request), service="kms", hosts=HOSTS, now=now)
    assert (credential.access_key_id, credential.region, credential.service) == (KEY_ID, "eu-west-1", "kms")
    sigv4.verify(_received(request), credential, SECRET)


def _refusal(received: ReceivedRequest, now: datetime, secret: str = SECRET) -> str:
    with pytest.raises(SignatureRefused) as refused:
        sigv4.verify(received, sigv4.parse(received, service="kms", hosts=HOSTS, now=now), secret)
    assert SECRET not in str(refused.value)
    return refused.value.code


def _replace(received: ReceivedRequest, **changes: object) -> ReceivedRequest:
    return dataclasses.replace(received, **changes)  # type: ignore[arg-type]


@pytest.fixture
def signed() -> tuple[ReceivedRequest, datetime]:
    now = datetime.now(UTC)
    request, _ = _signed(
        "POST", "https://127.0.0.1:8443/", {"X-Amz-Target": "TrentService.Encrypt"}, b'{"KeyId":"a"}', now
    )
    return _received(request), now


def test_every_change_to_a_signed_part_is_refused(signed: tuple[ReceivedRequest, datetime]) -> None:
    received, now = signed
    assert _refusal(received, now, secret=SECRET + "x") == "InvalidSignatureException"
    assert _refusal(_replace(received, body=b'{"KeyId":"b"}'), now) == "InvalidSignatureException"
    assert _refusal(_replace(received, raw_path="/x"), now) == "InvalidSignatureException"
    assert _refusal(_replace(received, query="a=1"), now) == "InvalidSignatureException"
    assert _refusal(_replace(received, method="PUT"), now) == "InvalidSignatureException"
    headers = [(n, "TrentService.Decrypt" if n.lower() == "x-amz-target" else v) for n, v in received.headers]
    assert _refusal(_replace(received, headers=headers), now) == "InvalidSignatureException"


def test_time_skew_over_15_minutes_is_refused(signed: tuple[ReceivedRequest, datetime]) -> None:
    received, now = signed
    for skew in (timedelta(minutes=16), -timedelta(minutes=16)):
        with pytest.raises(SignatureRefused) as refused:
            sigv4.parse(received, service="kms", hosts=HOSTS, now=now + skew)
        assert refused.value.code == "InvalidSignatureException"
    sigv4.parse(received, service="kms", hosts=HOSTS, now=now + timedelta(minutes=14))


def test_malformed_missing_and_foreign_credentials(signed: tuple[ReceivedRequest, datetime]) -> None:
    received, now = signed
    without = [(n, v) for n, v in received.headers if n.lower() != "authorization"]
    cases = {
        "MissingAuthenticationTokenException": without,
        "IncompleteSignatureException": [*without, ("Authorization", "AWS4-HMAC-SHA256 Credential=x")],
        "UnrecognizedClientException": [*received.headers, ("X-Amz-Security-Token", "token")],
    }
    for code, headers in cases.items():
        with pytest.raises(SignatureRefused) as refused:
            sigv4.parse(_replace(received, headers=headers), service="kms", hosts=HOSTS, now=now)
        assert refused.value.code == code
    with pytest.raises(SignatureRefused) as refused:
        sigv4.parse(received, service="s3", hosts=HOSTS, now=now)
    assert refused.value.code == "InvalidSignatureException"
    no_date = [(n, v) for n, v in received.headers if n.lower() != "x-amz-date"]
    with pytest.raises(SignatureRefused) as refused:
        sigv4.parse(_replace(received, headers=no_date), service="kms", hosts=HOSTS, now=now)
    assert refused.value.code == "IncompleteSignatureException"


def test_a_claimed_payload_hash_must_be_the_bodys() -> None:
    now = datetime.now(UTC)
    for claimed in (sigv4.UNSIGNED_PAYLOAD, "0" * 64):
        headers = {"X-Amz-Target": "TrentService.Encrypt", "X-Amz-Content-SHA256": claimed}
        request, _ = _signed("POST", "https://127.0.0.1:8443/", headers, b'{"KeyId":"a"}', now)
        assert _refusal(_received(request), now) == "InvalidSignatureException"


def test_every_amz_header_present_must_be_signed(signed: tuple[ReceivedRequest, datetime]) -> None:
    received, now = signed
    authorization = received.header("authorization") or ""
    assert ";x-amz-target," in authorization
    without_target = [
        (n, authorization.replace(";x-amz-target,", ",") if n.lower() == "authorization" else v)
        for n, v in received.headers
    ]
    for headers in (
        without_target,  # the target present, the signature made without it
        [*received.headers, ("X-Amz-Content-SHA256", "x")],
        [*received.headers, ("X-Amz-Anything", "x")],
    ):
        with pytest.raises(SignatureRefused) as refused:
            sigv4.parse(_replace(received, headers=headers), service="kms", hosts=HOSTS, now=now)
        assert refused.value.code == "IncompleteSignatureException"
        assert "is present in the request but not a 'SignedHeader'" in refused.value.message


def test_the_signed_host_must_be_one_of_the_services_own(signed: tuple[ReceivedRequest, datetime]) -> None:
    received, now = signed
    for host in ("evil.example", "127.0.0.1:1", "127.0.0.1", ""):
        headers = [(n, host if n.lower() == "host" else v) for n, v in received.headers]
        with pytest.raises(SignatureRefused) as refused:
            sigv4.parse(_replace(received, headers=headers), service="kms", hosts=HOSTS, now=now)
        assert refused.value.code == "InvalidSignatureException", host
    assert sigv4.parse(received, service="kms", hosts={"127.0.0.1:8443"}, now=now).service == "kms"
    upper = [(n, "127.0.0.1:8443".upper() if n.lower() == "host" else v) for n, v in received.headers]
    assert sigv4.parse(_replace(received, headers=upper), service="kms", hosts=HOSTS, now=now)
