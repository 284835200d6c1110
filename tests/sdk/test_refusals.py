"""The SDK refuses the silent mistakes: a context that is not ``str`` to ``str``, a ``verify=`` it
would ignore, ``http://``, and errors that do not say which key or principal they are about.

Requests go to ``httpx.MockTransport`` (no sockets), except where a real CA bundle is loaded.
"""

from __future__ import annotations

import io
import ssl
from pathlib import Path
from typing import Any

import httpx
import keymanager_sdk as km
import pytest
from keymanager_sdk import _connection, _envelope

from keymanager.cli.tls import ensure_dev_pki


def _client(sent: list[httpx.Request], answer: httpx.Response | None = None) -> km.KeyManager:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answer or httpx.Response(200, json={"ciphertext": "km:1:k:1:AA", "key_id": "k", "key_version": 1})

    return km.KeyManager("https://km.test", token="t", transport=httpx.MockTransport(handler), max_retries=0)


@pytest.mark.parametrize(
    ("context", "named"),
    [
        ({"customer": 42}, "value of 'customer' must be str, not int"),
        ({"customer": None}, "value of 'customer' must be str, not NoneType"),
        ({"customer": b"42"}, "value of 'customer' must be str, not bytes"),
        ({7: "x"}, "key 7 must be str, not int"),
        ([("customer", "42")], "must be a mapping of str to str, not list"),
        ("customer=42", "must be a mapping of str to str, not str"),
    ],
)
def test_a_context_that_is_not_str_to_str_is_refused_before_anything_is_sent(context: Any, named: str) -> None:
    sent: list[httpx.Request] = []
    with _client(sent) as client:
        for call in (
            lambda: client.encrypt("cards", "4111", context=context),
            lambda: client.decrypt("km:1:k:1:AA", context=context),
            lambda: client.generate_data_key("cards", context=context),
            lambda: client.mac("cards", "4111", context=context),
            lambda: client.encrypt_many("cards", ["4111"], context=context),
        ):
            with pytest.raises(TypeError) as refused:
                call()
            assert named in str(refused.value)
    assert sent == []


def test_an_envelope_context_follows_the_same_rule() -> None:
    with pytest.raises(TypeError, match="value of 'customer' must be str, not int"):
        _envelope.seal_stream(
            io.BytesIO(b"x"), io.BytesIO(), data_key=bytes(32), wrapped_key="w", context={"customer": 42}
        )


def test_a_str_context_is_sent_as_it_is() -> None:
    sent: list[httpx.Request] = []
    with _client(sent) as client:
        client.encrypt("cards", "4111", context={"customer": "42"})
    assert b'"context":{"customer":"42"}' in sent[0].content


def test_plain_http_is_refused_at_construction_for_both_clients() -> None:
    for make in (km.KeyManager, km.AsyncKeyManager):
        with pytest.raises(km.ConfigurationError, match=r"http:// is refused.*use https://"):
            make("http://127.0.0.1:8443")
    with pytest.raises(km.ConfigurationError, match="http://"):
        km.KeyManager.from_env({"KM_URL": "http://127.0.0.1:8443"})


@pytest.fixture(scope="module")
def dev_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_dev_pki(tmp_path_factory.mktemp("pki")).ca_cert


def test_verify_takes_a_ca_bundle_path_as_httpx_does(dev_ca: Path) -> None:
    _, by_path = _connection.http_options(None, None, None, None, str(dev_ca))
    _, by_pathlike = _connection.http_options(None, None, None, None, dev_ca)
    _, by_ca = _connection.http_options(None, str(dev_ca), None, None, None)
    _, system = _connection.http_options(None, None, None, None, None)
    names = [[c.get("subject") for c in ctx.get_ca_certs()] for ctx in (by_path, by_pathlike, by_ca)]
    assert names[0] == names[1] == names[2] and len(names[0]) == 1  # the bundle and nothing else
    assert by_path.verify_mode == ssl.CERT_REQUIRED and by_path.check_hostname
    assert names[0] != [c.get("subject") for c in system.get_ca_certs()]
    with pytest.raises(km.ConfigurationError, match="no such file"):
        km.KeyManager("https://km.test", verify="/nonexistent/ca.pem")


def test_verify_and_ca_naming_two_bundles_is_refused(dev_ca: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pem"
    other.write_bytes(dev_ca.read_bytes())
    with pytest.raises(km.ConfigurationError, match="two CA bundles"):
        km.KeyManager("https://km.test", ca=str(dev_ca), verify=str(other))


@pytest.mark.parametrize("verify", [1, b"/etc/ssl/ca.pem", ["ca.pem"], object()])
def test_verify_of_another_type_is_a_type_error_pointing_at_ca(verify: Any) -> None:
    for make in (km.KeyManager, km.AsyncKeyManager):
        with pytest.raises(TypeError, match=r"verify must be a bool or an ssl.SSLContext.*ca="):
            make("https://km.test", verify=verify)


@pytest.mark.parametrize(
    ("answer", "error", "about"),
    [
        (404, km.KeyNotFound, "[key 'cards']"),
        (403, km.Forbidden, "[key 'cards']"),
    ],
)
def test_errors_of_a_key_call_name_the_key(answer: int, error: type[km.APIError], about: str) -> None:
    code = "key_not_found" if answer == 404 else "forbidden"
    body = {"error": {"code": code, "message": "no"}, "request_id": "r"}
    with _client([], httpx.Response(answer, json=body)) as client:
        for call in (
            lambda: client.encrypt("cards", "x"),
            lambda: client.get_key("cards"),
            lambda: client.rotate_key("cards"),
            lambda: client.tokenize("cards", "4111111111111111"),
        ):
            with pytest.raises(error) as failed:
                call()
            assert failed.value.key == "cards" and about in str(failed.value)


def test_errors_of_a_principal_call_name_the_principal() -> None:
    body = {"error": {"code": "not_found", "message": "principal not found"}, "request_id": "r"}
    with _client([], httpx.Response(404, json=body)) as client:
        with pytest.raises(km.NotFound) as failed:
            client.delete_principal("billing")
        assert failed.value.principal == "billing" and "[principal 'billing']" in str(failed.value)
        with pytest.raises(km.NotFound, match=r"\[principal 'billing'\]"):
            client.list_access_keys("billing")


def test_plain_http_only_when_asked_for_by_name() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"status": "ok"})

    transport = httpx.MockTransport(handler)
    with km.KeyManager("http://km.test", insecure_http=True, transport=transport) as client:
        assert client.health().status == "ok"
    assert str(sent[0].url) == "http://km.test/v1/health"
