"""libmongocrypt (MongoDB's client-side field-level encryption, through ``pymongocrypt``) with a KMIP
KMS provider: our KMIP listener, unmodified client code, no MongoDB server.

pymongocrypt's ``ExplicitEncrypter`` runs libmongocrypt's state machine and asks its callback for
I/O: here the key vault is a dict in memory (``KeyVault``), and each KMS request libmongocrypt
encodes (TTLV) goes over mTLS to our KMIP port, as MongoDB's drivers send it with their
``kms_tls_options`` (the client certificate of a principal, the service's CA). Two kinds of data
key: ``delegated: true`` (libmongocrypt creates an AES-256 key, activates it and has the server
encrypt and decrypt the data key with AES-CBC/PKCS5 under a server-chosen IV: the key never leaves
the HSM), and without (libmongocrypt registers a 96-byte secret and gets it back to unwrap locally).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.binary import Binary
from pymongocrypt import binding
from pymongocrypt.errors import MongoCryptError
from pymongocrypt.explicit_encrypter import ExplicitEncrypter
from pymongocrypt.options import MongoCryptOptions
from pymongocrypt.state_machine import MongoCryptCallback

from tests.kmip.conftest import REFERENCE, Identity, KmipServer

pytestmark = pytest.mark.interop  # make test-interop: libmongocrypt

RANDOM = "AEAD_AES_256_CBC_HMAC_SHA_512-Random"
DETERMINISTIC = "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic"
CARD = "4111 1111 1111 1111"
ENCRYPTED_VALUE = 6
"""BSON binary subtype of a client-side encrypted value."""
STRANGERS_REFUSAL = r"Result Reason \(12\): Permission Denied" if REFERENCE else r"Result Reason \(1\): Item Not Found"
"""What a principal hears of a key no policy names it on: ours does not say the key exists."""


class KeyVault(MongoCryptCallback):
    """libmongocrypt's I/O: data keys kept in memory, KMS requests sent over mTLS with ``tls``."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self.tls = tls
        self.keys: dict[bytes, bytes] = {}
        self.kms_requests = 0

    def kms_request(self, kms_context: Any) -> None:
        """One KMIP request: libmongocrypt's message sent, the answer fed back as it asks for bytes."""
        host, port = kms_context.endpoint.rsplit(":", 1)
        self.kms_requests += 1
        with (
            socket.create_connection((host, int(port)), timeout=30) as raw,
            self.tls.wrap_socket(raw, server_hostname=host) as conn,
        ):
            conn.sendall(kms_context.message)
            while (needed := kms_context.bytes_needed) > 0:
                data = conn.recv(needed)
                if not data:
                    raise ConnectionError("the KMIP server closed the connection before its answer ended")
                kms_context.feed(data)

    def collection_info(self, database: str, filter: bytes) -> None:
        raise AssertionError("explicit encryption never lists collections")

    def mark_command(self, database: str, cmd: bytes) -> None:
        raise AssertionError("explicit encryption never asks mongocryptd")

    def fetch_keys(self, filter: bytes) -> Iterator[bytes]:
        """The stored data keys whose ``_id`` the filter names (``{"$or": [{"_id": {"$in": [...]}}, ...]}``)."""
        wanted = {bytes(i) for clause in bson.decode(filter)["$or"] for i in clause.get("_id", {}).get("$in", [])}
        yield from (self.keys[i] for i in wanted if i in self.keys)

    def insert_data_key(self, data_key: bytes) -> Binary:
        """Keep the data key document; its ``_id`` (a UUID, binary subtype 4)."""
        key_id: Binary = bson.decode(data_key)["_id"]
        self.keys[bytes(key_id)] = data_key
        return key_id

    def bson_encode(self, doc: dict[str, Any]) -> bytes:
        return bson.encode(doc)

    def close(self) -> None:
        """Nothing held between requests."""


def encrypter(kmip_server: KmipServer, vault: KeyVault) -> ExplicitEncrypter:
    """A fresh libmongocrypt handle (its own key cache) with ``kmip`` pointing at our KMIP port."""
    return ExplicitEncrypter(vault, MongoCryptOptions({"kmip": {"endpoint": kmip_server.endpoint}}))


@pytest.fixture(scope="module")
def owner(kmip_server: KmipServer) -> Identity:
    """libmongocrypt's principal: it creates the keys it uses."""
    return kmip_server.principal("mongocrypt", create_keys=True)


@pytest.fixture(scope="module")
def stranger(kmip_server: KmipServer) -> Identity:
    """A principal that no key names."""
    return kmip_server.principal("mongocrypt-stranger")


def test_libmongocrypt_is_the_library_shipped_in_the_pymongocrypt_wheel() -> None:
    shipped = Path(binding._path)
    assert shipped.is_file(), f"the pymongocrypt wheel for this machine has no {shipped.name}"
    assert binding.libmongocrypt_version()  # loaded, not the deferred import error of a missing library
    assert str(shipped.resolve()) in Path("/proc/self/maps").read_text()  # that file, not a system copy


@pytest.mark.parametrize(
    ("delegated", "algorithm"), [(True, RANDOM), (False, DETERMINISTIC)], ids=["delegated", "secret-data"]
)
def test_a_value_encrypted_under_a_kmip_data_key_decrypts(
    kmip_server: KmipServer, owner: Identity, stranger: Identity, delegated: bool, algorithm: str
) -> None:
    vault = KeyVault(kmip_server.tls_context(owner))
    master_key = {"delegated": True} if delegated else {}
    key_id = encrypter(kmip_server, vault).create_data_key("kmip", master_key=master_key)
    stored = bson.decode(vault.keys[bytes(key_id)])["masterKey"]
    assert stored["provider"] == "kmip" and stored["keyId"]
    assert stored.get("delegated", False) is delegated

    value = bson.encode({"v": CARD})
    encrypted = encrypter(kmip_server, vault).encrypt(value, algorithm, key_id=key_id)
    ciphertext = bson.decode(encrypted)["v"]
    assert isinstance(ciphertext, Binary) and ciphertext.subtype == ENCRYPTED_VALUE
    assert CARD.encode() not in bytes(ciphertext)

    asked = vault.kms_requests
    decrypted = encrypter(kmip_server, vault).decrypt(encrypted)  # a fresh handle: the KMS is asked again
    assert bson.decode(decrypted)["v"] == CARD
    assert vault.kms_requests > asked

    # The same key vault in the hands of a principal the key does not name: refused by the server.
    outsider = KeyVault(kmip_server.tls_context(stranger))
    outsider.keys = vault.keys
    with pytest.raises(MongoCryptError, match=STRANGERS_REFUSAL):
        encrypter(kmip_server, outsider).decrypt(encrypted)
