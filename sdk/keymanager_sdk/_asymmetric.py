"""Asymmetric keys (RSA, ECC, Ed25519): the calls, their typed results, and the methods both clients inherit.

The private half of every key stays in the service's HSM; what comes out is a signature, a
verdict, a public key, an RSA-OAEP plaintext, a shared secret, or a data key pair::

    key = km.create_key("docs-signing", algorithm="RSA_2048", usage="SIGN_VERIFY", policy=...)
    signed = km.sign("docs-signing", document, "RSASSA_PSS_SHA_256")
    km.verify("docs-signing", document, signed, "RSASSA_PSS_SHA_256")        # True
    km.get_public_key("docs-signing").load().verify(...)                     # cryptography, offline

Messages are ``str`` (UTF-8) or bytes-like; ``message_type="DIGEST"`` sends a precomputed digest
of the algorithm's hash instead of the message (``RAW`` messages take at most 4,096 bytes). The
names of specs, usages and algorithms are AWS KMS's (``RSA_2048``, ``SIGN_VERIFY``,
``ECDSA_SHA_256``, ``RSAES_OAEP_SHA_256``, ``ECDH`` …). A bad signature is ``False``, not an
error; a wrong usage, an algorithm of another spec or a digest of the wrong length is an
``InvalidRequest``; every bad OAEP ciphertext the one ``DecryptionFailed``.

RSA-OAEP encryption and decryption are ``encrypt(..., algorithm=)`` / ``decrypt(..., key=,
algorithm=)`` of the clients (``_core``); this module has the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from keymanager_sdk._core import Call, Plaintext, _json_parser, _path, _with_context
from keymanager_sdk._models import Context, as_bytes, b64decode, b64encode

T = TypeVar("T")


def _names(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    return tuple(str(v) for v in data.get(name) or ())


@dataclass(frozen=True)
class PublicKey:
    """The public half of an asymmetric key: ``der`` (DER SubjectPublicKeyInfo, as AWS KMS's
    GetPublicKey returns it) and ``pem``; ``load()`` gives it as a ``cryptography`` public key.
    ``algorithm`` is the key spec, ``usage`` its key usage, and the algorithm lists say what the key
    accepts (empty when not of its usage)."""

    key_id: str
    algorithm: str
    usage: str
    der: bytes
    pem: str
    signing_algorithms: tuple[str, ...] = ()
    encryption_algorithms: tuple[str, ...] = ()
    key_agreement_algorithms: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PublicKey:
        der = b64decode(data["public_key"])
        pem = data.get("public_key_pem") or serialization.load_der_public_key(der).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode("ascii")
        return cls(
            key_id=str(data["key_id"]),
            algorithm=str(data["algorithm"]),
            usage=str(data["usage"]),
            der=der,
            pem=str(pem),
            signing_algorithms=_names(data, "signing_algorithms"),
            encryption_algorithms=_names(data, "encryption_algorithms"),
            key_agreement_algorithms=_names(data, "key_agreement_algorithms"),
        )

    def load(self) -> PublicKeyTypes:
        """The key as a ``cryptography`` public key (``RSAPublicKey``, ``EllipticCurvePublicKey``,
        ``Ed25519PublicKey``); ``ValueError`` when ``cryptography`` cannot read it."""
        return serialization.load_der_public_key(self.der)


PeerKey = PublicKeyTypes | bytes | bytearray | memoryview | PublicKey
"""A peer's public key: a ``cryptography`` public key, a ``PublicKey``, or DER SubjectPublicKeyInfo
bytes (PEM bytes are accepted too)."""


@dataclass(frozen=True)
class Signature:
    """A signature made in the HSM: raw bytes (ECDSA DER-encoded, as AWS KMS returns it; Ed25519 64 bytes)."""

    signature: bytes
    key_id: str
    algorithm: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Signature:
        return cls(b64decode(data["signature"]), str(data["key_id"]), str(data["algorithm"]))


@dataclass(frozen=True)
class SharedSecret:
    """The ECDH shared secret of a ``KEY_AGREEMENT`` key and a peer's public key (raw, not hashed:
    derive your keys from it with a KDF). Left out of ``repr``."""

    secret: bytes = field(repr=False)
    key_id: str
    algorithm: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SharedSecret:
        return cls(b64decode(data["shared_secret"]), str(data["key_id"]), str(data.get("algorithm") or "ECDH"))


@dataclass(frozen=True)
class DataKeyPair:
    """A key pair to use outside the service: ``public_key`` (DER SubjectPublicKeyInfo), the private
    key (PKCS#8 DER) encrypted under the named symmetric key as a ``km:1`` ciphertext
    (``decrypt(private_key_ciphertext, context)`` gives it back), and its plaintext (None when not
    asked for; left out of ``repr``)."""

    key_id: str
    key_pair_spec: str
    public_key: bytes
    private_key_ciphertext: str
    private_key_plaintext: bytes | None = field(default=None, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DataKeyPair:
        plaintext = data.get("private_key_plaintext")
        return cls(
            key_id=str(data["key_id"]),
            key_pair_spec=str(data["key_pair_spec"]),
            public_key=b64decode(data["public_key"]),
            private_key_ciphertext=str(data["private_key_ciphertext"]),
            private_key_plaintext=None if plaintext is None else b64decode(plaintext),
        )

    def load_public_key(self) -> PublicKeyTypes:
        """The public key as a ``cryptography`` public key."""
        return serialization.load_der_public_key(self.public_key)

    def load_private_key(self) -> PrivateKeyTypes:
        """The private key as a ``cryptography`` private key; ``ValueError`` when the pair came
        without its plaintext (decrypt ``private_key_ciphertext`` and load that)."""
        if self.private_key_plaintext is None:
            raise ValueError("the data key pair came without its private key plaintext")
        return serialization.load_der_private_key(self.private_key_plaintext, password=None)


def peer_der(public_key: object) -> bytes:
    """DER SubjectPublicKeyInfo of a ``PeerKey``; ``TypeError`` naming any other type."""
    if isinstance(public_key, PublicKey):
        return public_key.der
    if isinstance(public_key, bytes | bytearray | memoryview):
        raw = bytes(public_key)
        if raw.lstrip().startswith(b"-----BEGIN"):
            raw = serialization.load_pem_public_key(raw).public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        return raw
    public_bytes = getattr(public_key, "public_bytes", None)
    if public_bytes is None or isinstance(public_key, str):
        raise TypeError(
            f"public_key must be a cryptography public key, a PublicKey or DER bytes, not {type(public_key).__name__}"
        )
    der = public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return bytes(der)


def signature_bytes(signature: object) -> bytes:
    """The bytes of a ``Signature`` or of a bytes-like signature (``TypeError`` for ``str``: decode it first)."""
    if isinstance(signature, Signature):
        return signature.signature
    if isinstance(signature, str):
        raise TypeError("signature must be bytes-like (or a Signature), not str: base64-decode it first")
    return as_bytes(signature, "signature")


def _message_body(message: Plaintext, message_type: str, algorithm: str) -> dict[str, Any]:
    return {"message": b64encode(as_bytes(message, "message")), "message_type": message_type, "algorithm": algorithm}


def get_public_key_call(key: str) -> Call[PublicKey]:
    parse = _json_parser(PublicKey.from_json)
    return Call("GET", _path("keys", key, "public-key"), parse, retryable=True, key=key)


def sign_call(key: str, message: Plaintext, algorithm: str, message_type: str) -> Call[Signature]:
    body = _message_body(message, message_type, algorithm)
    parse = _json_parser(Signature.from_json)
    return Call("POST", _path("keys", key, "sign"), parse, json=body, retryable=True, key=key)


def verify_call(key: str, message: Plaintext, signature: object, algorithm: str, message_type: str) -> Call[bool]:
    body = _message_body(message, message_type, algorithm)
    body["signature"] = b64encode(signature_bytes(signature))
    parse = _json_parser(lambda d: _valid(d["valid"]))
    return Call("POST", _path("keys", key, "verify"), parse, json=body, retryable=True, key=key)


def _valid(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"valid is {type(value).__name__}, not a boolean")
    return value


def derive_call(key: str, public_key: object, algorithm: str) -> Call[SharedSecret]:
    body = {"public_key": b64encode(peer_der(public_key)), "algorithm": algorithm}
    parse = _json_parser(SharedSecret.from_json)
    return Call("POST", _path("keys", key, "derive-shared-secret"), parse, json=body, retryable=True, key=key)


def data_key_pair_call(
    key: str, key_pair_spec: str, context: Context | None, include_plaintext: bool
) -> Call[DataKeyPair]:
    body = _with_context({"key_pair_spec": key_pair_spec, "include_plaintext": include_plaintext}, context)
    parse = _json_parser(DataKeyPair.from_json)
    return Call("POST", _path("keys", key, "datakey-pair"), parse, json=body, retryable=True, key=key)


class AsymmetricMethods:
    """Asymmetric-key methods of :class:`~keymanager_sdk.KeyManager` (see the module)."""

    def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    def get_public_key(self, key: str) -> PublicKey:
        """The public key of an asymmetric ``key`` (right ``get_public_key``); ``PublicKey.load()``
        gives it to ``cryptography``. ``InvalidRequest`` for a symmetric key."""
        return self._run(get_public_key_call(key))

    def sign(self, key: str, message: Plaintext, algorithm: str, message_type: str = "RAW") -> Signature:
        """Sign ``message`` (≤ 4,096 bytes; with ``message_type="DIGEST"`` its digest) in the HSM with
        a ``SIGN_VERIFY`` key, e.g. ``algorithm="ECDSA_SHA_256"``."""
        return self._run(sign_call(key, message, algorithm, message_type))

    def verify(
        self,
        key: str,
        message: Plaintext,
        signature: bytes | Signature,
        algorithm: str,
        message_type: str = "RAW",
    ) -> bool:
        """True when ``signature`` is ``key``'s signature of ``message`` with ``algorithm``; a bad
        signature is False (not an error)."""
        return self._run(verify_call(key, message, signature, algorithm, message_type))

    def derive_shared_secret(self, key: str, public_key: PeerKey, algorithm: str = "ECDH") -> SharedSecret:
        """ECDH of a ``KEY_AGREEMENT`` key and a peer's ``public_key`` of the same curve (a
        ``cryptography`` public key, a ``PublicKey``, or DER SubjectPublicKeyInfo)."""
        return self._run(derive_call(key, public_key, algorithm))

    def generate_data_key_pair(
        self, key: str, key_pair_spec: str, context: Context | None = None, include_plaintext: bool = True
    ) -> DataKeyPair:
        """A new key pair of ``key_pair_spec`` (e.g. ``ECC_NIST_P256``), its private key encrypted
        under the symmetric ``key`` (with ``context``), and in plaintext unless ``include_plaintext``
        is False."""
        return self._run(data_key_pair_call(key, key_pair_spec, context, include_plaintext))


class AsyncAsymmetricMethods:
    """Asymmetric-key methods of :class:`~keymanager_sdk.AsyncKeyManager` (as :class:`AsymmetricMethods`, awaited)."""

    async def _run(self, call: Call[T]) -> T:
        raise NotImplementedError  # the client's

    async def get_public_key(self, key: str) -> PublicKey:
        """The public key of an asymmetric ``key``."""
        return await self._run(get_public_key_call(key))

    async def sign(self, key: str, message: Plaintext, algorithm: str, message_type: str = "RAW") -> Signature:
        """Sign ``message`` (or its digest) in the HSM with a ``SIGN_VERIFY`` key."""
        return await self._run(sign_call(key, message, algorithm, message_type))

    async def verify(
        self,
        key: str,
        message: Plaintext,
        signature: bytes | Signature,
        algorithm: str,
        message_type: str = "RAW",
    ) -> bool:
        """True when ``signature`` is ``key``'s signature of ``message``; a bad signature is False."""
        return await self._run(verify_call(key, message, signature, algorithm, message_type))

    async def derive_shared_secret(self, key: str, public_key: PeerKey, algorithm: str = "ECDH") -> SharedSecret:
        """ECDH of a ``KEY_AGREEMENT`` key and a peer's public key of the same curve."""
        return await self._run(derive_call(key, public_key, algorithm))

    async def generate_data_key_pair(
        self, key: str, key_pair_spec: str, context: Context | None = None, include_plaintext: bool = True
    ) -> DataKeyPair:
        """A new key pair of ``key_pair_spec``, its private key encrypted under the symmetric ``key``."""
        return await self._run(data_key_pair_call(key, key_pair_spec, context, include_plaintext))
