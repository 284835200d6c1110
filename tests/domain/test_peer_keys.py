"""ECDH peer public keys: only a DER SubjectPublicKeyInfo that names the key's own curve is taken;
another curve (one ``cryptography`` knows, or not), explicit curve parameters (even the key's own
curve's) and other key types are InvalidPeerKey naming the curve (issue 41, item 6: explicit
parameters of another curve, or a curve ``cryptography`` lacks, raised ``UnsupportedAlgorithm``, a 500
with a traceback).

The vectors are public keys made by ``openssl ecparam -genkey`` then ``openssl ec -pubout -outform
DER`` (``-param_enc explicit`` for the explicit ones)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from keymanager.domain import public_keys
from keymanager.domain.key_specs import SPECS
from keymanager.domain.models import Algorithm
from keymanager.errors import InvalidPeerKey

EXPLICIT_P256 = bytes.fromhex(
    "3082014b3082010306072a8648ce3d02013081f7020101302c06072a8648ce3d0101022100ffffffff000000010000000000"
    "00000000000000ffffffffffffffffffffffff305b0420ffffffff00000001000000000000000000000000ffffffffffffff"
    "fffffffffc04205ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b031500c49d360886e70493"
    "6a6678e1139d26b7819f7e900441046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342"
    "e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5022100ffffffff00000000ffffffffffffffffbce6"
    "faada7179e84f3b9cac2fc632551020101034200049fdad93501dccda21a33aa2c05a554dbc1e0f096b5f3a71d4919185557"
    "9549528b8cd17416afed8e0e27da72ed9ba83f774c753c23722abeae0dd6bb1ed0f1f3"
)
"""A P-256 key whose SubjectPublicKeyInfo spells out P-256's parameters instead of naming it."""
EXPLICIT_BRAINPOOL = bytes.fromhex(
    "308201333081ec06072a8648ce3d02013081e0020101302c06072a8648ce3d0101022100a9fb57dba1eea9bc3e660a909d83"
    "8d726e3bf623d52620282013481d1f6e5377304404207d5a0975fc2c3057eef67530417affe7fb8055c126dc5c6ce94a4b44"
    "f330b5d9042026dc5c6ce94a4b44f330b5d9bbd77cbf958416295cf7e1ce6bccdc18ff8c07b60441048bd2aeb9cb7e57cb2c"
    "4b482ffc81b7afb9de27e1e3bd23c23a4453bd9ace3262547ef835c3dac4fd97f8461a14611dc9c27745132ded8e545c1d54"
    "c72f046997022100a9fb57dba1eea9bc3e660a909d838d718c397aa3b561a6f7901e0e82974856a7020101034200042e0016"
    "3b0289ce0b149adad8aa48a7bbc963fd58f8f2ca43ac247dfb7b598a548530ad4ee3faa41571ac1f690f34ca0fe22c10999d"
    "b9526b69682cc30eb9cd82"
)
"""brainpoolP256r1 by explicit parameters (``cryptography``: UnsupportedAlgorithm)."""
NAMED_PRIME192V2 = bytes.fromhex(
    "3049301306072a8648ce3d020106082a8648ce3d030102033200048ac06be4d1f59eb45f5f7066f55924845eae754fe32e05"
    "5c8e1786e62d29405117612e0576d6e10949b22995e9c67295"
)
"""X9.62 prime192v2 by name (OID 1.2.840.10045.3.1.2), a curve ``cryptography`` does not know."""

P256 = SPECS[Algorithm.ECC_NIST_P256]


def spki(private: object) -> bytes:
    return private.public_key().public_bytes(  # type: ignore[attr-defined,no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_a_key_on_the_named_curve_gives_its_point() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    point = public_keys.peer_point(P256, spki(private))
    assert point == private.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


@pytest.mark.parametrize(
    ("peer", "words"),
    [
        pytest.param(
            EXPLICIT_P256,
            "explicit parameters: it must name the curve secp256r1 (the curve of ECC_NIST_P256)",
            id="explicit-p256",
        ),
        pytest.param(
            EXPLICIT_BRAINPOOL, "explicit parameters: it must name the curve secp256r1", id="explicit-brainpool"
        ),
        pytest.param(
            NAMED_PRIME192V2, "on the curve 1.2.840.10045.3.1.2: it must be on the curve secp256r1", id="prime192v2"
        ),
        pytest.param(
            spki(ec.generate_private_key(ec.SECP384R1())),
            "on the curve secp384r1: it must be on the curve secp256r1",
            id="p384",
        ),
        pytest.param(
            spki(ec.generate_private_key(ec.BrainpoolP256R1())), "on the curve brainpoolP256r1", id="brainpool"
        ),
        pytest.param(
            spki(rsa.generate_private_key(65537, 2048)), "must be an EC public key on the curve secp256r1", id="rsa"
        ),
        pytest.param(
            spki(ed25519.Ed25519PrivateKey.generate()), "must be an EC public key on the curve secp256r1", id="ed25519"
        ),
        pytest.param(b"not a key", "not a DER SubjectPublicKeyInfo", id="text"),
        pytest.param(b"", "not a DER SubjectPublicKeyInfo", id="empty"),
        pytest.param(b"\x30\x03\x02\x01\x00", "not a DER SubjectPublicKeyInfo", id="integer"),
        pytest.param(EXPLICIT_P256[:60], "not a DER SubjectPublicKeyInfo", id="cut-in-parameters"),
        pytest.param(b"\x30\x84\xff\xff\xff\xff", "not a DER SubjectPublicKeyInfo", id="length-past-end"),
    ],
)  # ids by name: generated keys in ids differ between xdist workers, which then refuse to run
def test_every_other_peer_key_is_refused_naming_the_curve(peer: bytes, words: str) -> None:
    with pytest.raises(InvalidPeerKey) as refused:
        public_keys.peer_point(P256, peer)
    assert words in refused.value.message


def test_a_point_not_on_the_curve_is_refused() -> None:
    good = spki(ec.generate_private_key(ec.SECP256R1()))
    bad = good[:-1] + bytes([good[-1] ^ 1])  # the point moved off the curve
    with pytest.raises(InvalidPeerKey) as refused:
        public_keys.peer_point(P256, bad)
    assert "secp256r1" in refused.value.message
