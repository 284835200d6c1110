"""Public-key formats and public-key operations: no private key is ever handled here.

The HSM gives a public key as PKCS#11 attributes (an RSA modulus and exponent; an EC point with
its curve); :func:`spki_from_rsa` and :func:`spki_from_ec_point` turn them into the DER
SubjectPublicKeyInfo the API shows (what AWS's ``GetPublicKey`` returns). Signatures are verified
and OAEP plaintexts encrypted with ``cryptography`` and the stored public key (public operations;
every private-key operation runs in the HSM). The formats of what the HSM signs are here too:
PKCS#1 v1.5's DigestInfo and ECDSA's DER ``Ecdsa-Sig-Value``.
"""

from __future__ import annotations

from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa, utils

from keymanager.domain.key_specs import (
    OAEP_HASHES,
    SIGNING_HASHES,
    EncryptionAlgorithm,
    Hash,
    HsmKeyType,
    KeySpec,
    MessageType,
    SigningAlgorithm,
)
from keymanager.errors import InvalidPeerKey

_HASHES: dict[Hash, type[hashes.HashAlgorithm]] = {
    Hash.SHA1: hashes.SHA1,
    Hash.SHA224: hashes.SHA224,
    Hash.SHA256: hashes.SHA256,
    Hash.SHA384: hashes.SHA384,
    Hash.SHA512: hashes.SHA512,
}
_CURVES: dict[str, type[ec.EllipticCurve]] = {
    "secp256r1": ec.SECP256R1,
    "secp384r1": ec.SECP384R1,
    "secp521r1": ec.SECP521R1,
    "secp256k1": ec.SECP256K1,
}
_DIGEST_INFO_PREFIXES: dict[Hash, bytes] = {
    Hash.SHA256: bytes.fromhex("3031300d060960864801650304020105000420"),
    Hash.SHA384: bytes.fromhex("3041300d060960864801650304020205000430"),
    Hash.SHA512: bytes.fromhex("3051300d060960864801650304020305000440"),
}
"""RFC 8017 section 9.2 note 1: the DER DigestInfo before the digest, for PKCS#1 v1.5 signatures."""


def hash_algorithm(name: Hash) -> hashes.HashAlgorithm:
    """``cryptography``'s hash for ``name``."""
    return _HASHES[name]()


def digest_info(algorithm: SigningAlgorithm, digest: bytes) -> bytes:
    """The DER DigestInfo of ``digest`` that an RSASSA-PKCS1-v1_5 signature signs (CKM_RSA_PKCS pads it)."""
    return _DIGEST_INFO_PREFIXES[SIGNING_HASHES[algorithm]] + digest


def ecdsa_der(raw: bytes) -> bytes:
    """The DER ``Ecdsa-Sig-Value`` of a raw ``r ‖ s`` signature (as PKCS#11 gives it), as AWS returns it."""
    half = len(raw) // 2
    return utils.encode_dss_signature(int.from_bytes(raw[:half], "big"), int.from_bytes(raw[half:], "big"))


def ecdsa_raw(der: bytes, curve_bits: int) -> bytes:
    """The raw ``r ‖ s`` (as PKCS#11 takes it) of a DER ``Ecdsa-Sig-Value``; a malformed one gives
    bytes no signature equals."""
    size = (curve_bits + 7) // 8
    try:
        r, s = utils.decode_dss_signature(der)
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    except (ValueError, OverflowError):
        return b""


def spki_from_rsa(modulus: bytes, exponent: bytes) -> bytes:
    """The DER SubjectPublicKeyInfo of the RSA public key ``(n, e)`` (big-endian bytes, as PKCS#11 reads them)."""
    numbers = rsa.RSAPublicNumbers(int.from_bytes(exponent, "big"), int.from_bytes(modulus, "big"))
    return _der(numbers.public_key())


def unwrap_octet_string(encoded: bytes) -> bytes:
    """The content of a DER OCTET STRING (how PKCS#11 gives ``CKA_EC_POINT``); ``encoded`` itself when
    it is not one (a module that gives the raw point)."""
    if len(encoded) >= 2 and encoded[0] == 0x04:
        length, start = encoded[1], 2
        if length & 0x80:
            size = length & 0x7F
            length, start = int.from_bytes(encoded[2 : 2 + size], "big"), 2 + size
        if start + length == len(encoded):
            return encoded[start:]
    return encoded


def curve(spec: KeySpec) -> ec.EllipticCurve:
    """``cryptography``'s curve of an EC spec."""
    assert spec.curve is not None
    return _CURVES[spec.curve]()


def new_private_key(spec: KeySpec) -> rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey:
    """A new private key of ``spec`` made by ``cryptography`` (for data key pairs, which leave the service)."""
    if spec.key_type is HsmKeyType.RSA:
        assert spec.key_bits is not None
        return rsa.generate_private_key(public_exponent=65537, key_size=spec.key_bits)
    if spec.key_type is HsmKeyType.EC_EDWARDS:
        return ed25519.Ed25519PrivateKey.generate()
    return ec.generate_private_key(curve(spec))


def spki_from_ec_point(spec: KeySpec, point: bytes) -> bytes:
    """The DER SubjectPublicKeyInfo of the EC or Edwards point ``point`` (the raw encoding, without
    PKCS#11's DER OCTET STRING around it) on the curve of ``spec``."""
    if spec.key_type is HsmKeyType.EC_EDWARDS:
        return _der(ed25519.Ed25519PublicKey.from_public_bytes(point))
    return _der(ec.EllipticCurvePublicKey.from_encoded_point(curve(spec), point))


def load(spki: bytes) -> Any:
    """The ``cryptography`` public key of a stored DER SubjectPublicKeyInfo."""
    return serialization.load_der_public_key(spki)


def pem(spki: bytes) -> str:
    """The PEM form (``-----BEGIN PUBLIC KEY-----``) of a DER SubjectPublicKeyInfo."""
    encoded: bytes = load(spki).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return encoded.decode()


def peer_point(spec: KeySpec, peer_spki: bytes) -> bytes:
    """The uncompressed point of a peer's DER SubjectPublicKeyInfo on ``spec``'s curve, for ECDH.

    Raises InvalidPeerKey when it is not a DER SubjectPublicKeyInfo of an EC key that names
    ``spec``'s curve (RFC 5480's ``namedCurve``): one of another key type, one of another curve
    (named in the refusal, known to ``cryptography`` or not), one giving its curve by explicit
    parameters (even those of ``spec``'s curve), or a point not on the curve.
    """
    wanted = f"{spec.curve} (the curve of {spec.algorithm})"
    named = _named_curve(peer_spki)
    if named is None:
        raise InvalidPeerKey(f"public_key must be an EC public key on the curve {wanted}")
    if named == _EXPLICIT:
        raise InvalidPeerKey(f"public_key gives its curve by explicit parameters: it must name the curve {wanted}")
    if named != spec.curve:
        raise InvalidPeerKey(f"public_key is on the curve {named}: it must be on the curve {wanted}")
    try:
        key = serialization.load_der_public_key(peer_spki)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise InvalidPeerKey(f"public_key is not a valid public key on the curve {wanted}") from None
    assert isinstance(key, ec.EllipticCurvePublicKey)
    return key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


_EC_PUBLIC_KEY = "1.2.840.10045.2.1"
_EXPLICIT = "explicit parameters"


def _named_curve(spki: bytes) -> str | None:
    """The curve an EC SubjectPublicKeyInfo names (``cryptography``'s name, else its OID),
    :data:`_EXPLICIT` for one that gives parameters instead; None for another key type. Raises
    InvalidPeerKey when ``spki`` does not begin as a DER SubjectPublicKeyInfo."""
    try:
        outer, _ = _tlv(spki, 0, 0x30)
        algorithm, _ = _tlv(spki, outer, 0x30)
        oid_start, oid_end = _tlv(spki, algorithm, 0x06)
        if _oid(spki[oid_start:oid_end]) != _EC_PUBLIC_KEY:
            return None
        if oid_end >= len(spki) or spki[oid_end] != 0x06:
            return _EXPLICIT  # ECParameters, or implicitlyCA's NULL: no named curve
        start, end = _tlv(spki, oid_end, 0x06)
    except (IndexError, ValueError):
        raise InvalidPeerKey("public_key is not a DER SubjectPublicKeyInfo") from None
    dotted = _oid(spki[start:end])
    try:
        return ec.get_curve_for_oid(x509.ObjectIdentifier(dotted))().name
    except LookupError:
        return dotted


def _tlv(der: bytes, at: int, tag: int) -> tuple[int, int]:
    """Where the contents of the DER element of ``tag`` at ``at`` begin and end; ValueError or
    IndexError when there is none."""
    if der[at] != tag:
        raise ValueError("unexpected tag")
    length, start = der[at + 1], at + 2
    if length & 0x80:
        size = length & 0x7F
        if not 0 < size <= 4:
            raise ValueError("unexpected length")
        length, start = int.from_bytes(der[start : start + size], "big"), start + size
    if start + length > len(der):
        raise ValueError("truncated")
    return start, start + length


def _oid(contents: bytes) -> str:
    """The dotted form of an OBJECT IDENTIFIER's contents."""
    if not contents or contents[-1] & 0x80:
        raise ValueError("truncated OID")
    arcs, value = [], 0
    for byte in contents:
        value = value << 7 | byte & 0x7F
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(arc) for arc in (first, arcs[0] - 40 * first, *arcs[1:]))


def verify(
    spki: bytes, algorithm: SigningAlgorithm, message: bytes, message_type: MessageType, signature: bytes
) -> bool:
    """Whether ``signature`` is a valid ``algorithm`` signature of ``message`` (RAW, or the DIGEST of
    one) under the public key ``spki``; a malformed signature is simply not valid."""
    key = load(spki)
    chosen = hash_algorithm(SIGNING_HASHES[algorithm])
    signed: hashes.HashAlgorithm | utils.Prehashed = (
        utils.Prehashed(chosen) if message_type is MessageType.DIGEST else chosen
    )
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, message)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, message, ec.ECDSA(signed))
        elif algorithm.value.startswith("RSASSA_PSS"):
            key.verify(signature, message, padding.PSS(padding.MGF1(chosen), chosen.digest_size), signed)
        else:
            key.verify(signature, message, padding.PKCS1v15(), signed)
    except (InvalidSignature, ValueError):
        return False
    return True


def oaep_encrypt(spki: bytes, algorithm: EncryptionAlgorithm, plaintext: bytes) -> bytes:
    """The raw RSAES-OAEP ciphertext of ``plaintext`` under the RSA public key ``spki`` (MGF1 with the
    algorithm's hash, no label), as AWS returns it."""
    chosen = hash_algorithm(OAEP_HASHES[algorithm])
    key: rsa.RSAPublicKey = load(spki)
    return key.encrypt(plaintext, padding.OAEP(padding.MGF1(chosen), chosen, None))


def _der(key: Any) -> bytes:
    return bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
