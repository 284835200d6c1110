"""FF1 tokens with AES in SoftHSM: the NIST samples through the HSM, the key template, round trips.

The NIST sample key is created directly in the test token with a known CKA_VALUE (sensitive,
non-extractable, encrypt only): the proper way in for such a key is the import of issue 15
item 5, which does not exist yet. Every PKCS#11 call runs on the adapter's thread.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import pytest
from pkcs11 import Attribute, KeyType, Mechanism, ObjectClass, _pkcs11
from pkcs11 import exceptions as p11

from keymanager.domain.credentials import new_id
from keymanager.domain.ff1 import FF1
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.domain.tokens import Luhn, TokenAlphabet, TokenFormat, luhn_residue
from keymanager.domain.tokens import tokenize as software_tokenize
from keymanager.errors import InvalidRequest, KeyMaterialMissing
from keymanager.hsm import Hsm
from keymanager.hsm import tokenization as tk
from keymanager.hsm.templates import AES_ENCRYPT_ONLY_TEMPLATE
from tests.domain.test_ff1 import KEY_256, SAMPLES, software_prf

pytestmark = pytest.mark.softhsm

CARD = "4111111111111111"


def _create_known_key(token: Any, label: str, value: bytes) -> None:
    token.session().create_object(
        {**AES_ENCRYPT_ONLY_TEMPLATE, Attribute.KEY_TYPE: KeyType.AES, Attribute.LABEL: label, Attribute.VALUE: value}
    )


@pytest.fixture(scope="module")
def nist_key(hsm: Hsm) -> Iterator[HsmObjects]:
    """The NIST AES-256 sample key as an encrypt-only, non-extractable object in the test token."""
    objects = HsmObjects(enc_label=f"km/test-nist-{new_id()}/v1/ff1", mac_label=None)
    hsm.call(_create_known_key, objects.enc_label, KEY_256)
    yield objects
    hsm.destroy_version(objects)


@pytest.fixture
def ff1_version(hsm: Hsm) -> Iterator[HsmObjects]:
    objects = hsm.generate_version(new_id(), 1, Algorithm.FF1_AES_256)
    yield objects
    hsm.destroy_version(objects)


@pytest.mark.parametrize(
    ("radix", "tweak", "plaintext", "ciphertext"), [s[2:] for s in SAMPLES if s[0] >= 7], ids=["7", "8", "9"]
)
def test_nist_aes256_samples_through_the_hsm(
    hsm: Hsm, nist_key: HsmObjects, radix: int, tweak: bytes, plaintext: str, ciphertext: str
) -> None:
    assert tk.ff1_encrypt_text(hsm, nist_key, radix, plaintext, tweak) == ciphertext
    assert tk.ff1_decrypt_text(hsm, nist_key, radix, ciphertext, tweak) == plaintext


def _token_key(token: Any, label: str) -> Any:
    template = {Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.LABEL: label, Attribute.TOKEN: True}
    (key,) = token.session().get_objects(template)
    return key


def _value_len(token: Any, label: str) -> int:
    return int(_token_key(token, label)[Attribute.VALUE_LEN])


def _read(token: Any, label: str) -> dict[str, Any]:
    key = _token_key(token, label)
    names = ["TOKEN", "PRIVATE", "SENSITIVE", "EXTRACTABLE", "ENCRYPT", "DECRYPT", "WRAP", "UNWRAP", "SIGN"]
    read = {name: key[Attribute[name]] for name in names}
    try:
        key[Attribute.VALUE]
        read["value"] = "readable"
    except p11.AttributeSensitive:
        read["value"] = "sensitive"
    try:
        # python-pkcs11 leaves decrypt() off a key without CKA_DECRYPT: ask the HSM anyway.
        key.__class__ = type("DecryptingKey", (type(key), _pkcs11.DecryptMixin), {})
        key.decrypt(bytes(16), mechanism=Mechanism.AES_ECB)
        read["decrypt"] = "done"
    except p11.PKCS11Error as exc:
        read["decrypt"] = f"refused: {type(exc).__name__} {exc.args}"
    return read


def test_ff1_key_versions_can_only_encrypt(hsm: Hsm, ff1_version: HsmObjects, nist_key: HsmObjects) -> None:
    """Both a generated version and the NIST key made from its value hold only CKA_ENCRYPT. The
    generated one is 32 bytes long by its CKA_VALUE_LEN; the made one was given 32 bytes, and a token
    may leave CKA_VALUE_LEN off an object made with C_CreateObject (openCryptoki 3.8 does)."""
    assert hsm.call(_value_len, ff1_version.enc_label) == 32
    for objects in (ff1_version, nist_key):
        assert hsm.call(_read, objects.enc_label) == {
            "TOKEN": True,
            "PRIVATE": True,
            "SENSITIVE": True,
            "EXTRACTABLE": False,
            "ENCRYPT": True,
            "DECRYPT": False,
            "WRAP": False,
            "UNWRAP": False,
            "SIGN": False,
            "value": "sensitive",
            "decrypt": "refused: PKCS11Error ('Unmapped error code 0x68',)",  # CKR_KEY_FUNCTION_NOT_PERMITTED
        }


def test_card_token_keeps_last_four_and_comes_back(hsm: Hsm, ff1_version: HsmObjects) -> None:
    fmt = TokenFormat(keep_last=4, luhn=Luhn.VALID)
    token = tk.tokenize(hsm, ff1_version, fmt, CARD, b"")
    assert len(token) == 16 and token.endswith("1111") and token != CARD and luhn_residue(token) == 0
    assert tk.tokenize(hsm, ff1_version, fmt, CARD, b"") == token  # deterministic
    assert tk.tokenize(hsm, ff1_version, fmt, CARD, b"other") != token
    assert tk.detokenize(hsm, ff1_version, fmt, token, b"") == CARD


def test_another_version_gives_another_token(hsm: Hsm, ff1_version: HsmObjects) -> None:
    other = hsm.generate_version(new_id(), 2, Algorithm.FF1_AES_256)
    try:
        fmt = TokenFormat(keep_last=4)
        assert tk.tokenize(hsm, ff1_version, fmt, CARD, b"") != tk.tokenize(hsm, other, fmt, CARD, b"")
    finally:
        hsm.destroy_version(other)


@pytest.mark.parametrize(
    "fmt",
    [
        TokenFormat(keep_last=4, luhn=Luhn.VALID),
        TokenFormat(keep_first=6, keep_last=4),
        TokenFormat(keep_first=1, keep_last=1, luhn=Luhn.INVALID),
        TokenFormat(alphabet=TokenAlphabet.ALPHANUMERIC, keep_first=2),
    ],
    ids=["card-valid", "first6-last4", "invalid", "alphanumeric"],
)
def test_hsm_tokens_match_software_ff1_with_the_same_key(hsm: Hsm, nist_key: HsmObjects, fmt: TokenFormat) -> None:
    """The HSM's tokens are exactly FF1 with software AES under the same key, and come back."""
    rng = random.Random(str(fmt))
    software = FF1(software_prf(KEY_256), fmt.radix)
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"[: fmt.radix]
    for _ in range(100):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(16, 19) - (fmt.luhn is not Luhn.IGNORE)))
        value = body if fmt.luhn is Luhn.IGNORE else next(body + d for d in alphabet if luhn_residue(body + d) == 0)
        tweak = rng.randbytes(rng.randint(0, 32))
        token = tk.tokenize(hsm, nist_key, fmt, value, tweak)
        assert token == software_tokenize(software, fmt, value, tweak)
        assert tk.detokenize(hsm, nist_key, fmt, token, tweak) == value


def test_batches_give_per_item_results(hsm: Hsm, ff1_version: HsmObjects) -> None:
    fmt = TokenFormat(keep_last=4, luhn=Luhn.VALID)
    items = [(CARD, b""), ("4111111111111112", b""), ("5555555555554444", b"t")]
    tokens = asyncio.run(tk.atokenize_many(hsm, ff1_version, fmt, items))
    assert isinstance(tokens[1], InvalidRequest) and "Luhn" in tokens[1].message
    assert tokens[0] == tk.tokenize(hsm, ff1_version, fmt, CARD, b"")
    back = asyncio.run(
        tk.adetokenize_many(hsm, ff1_version, fmt, [(tokens[0], b""), ("12", b""), (tokens[2], b"t")])  # type: ignore[list-item]
    )
    assert back[0] == CARD and back[2] == "5555555555554444"
    assert isinstance(back[1], InvalidRequest)


def test_refused_values_never_reach_the_hsm(hsm: Hsm) -> None:
    calls: list[str] = []
    hsm.observer = lambda name, seconds, failed: calls.append(name)
    try:
        with pytest.raises(InvalidRequest, match="domain rule"):
            tk.tokenize(
                hsm, HsmObjects("km/none/ff1", None), TokenFormat(keep_first=6, keep_last=4), "12345678901", b""
            )
    finally:
        hsm.observer = None
    assert calls == []


def test_missing_key_object_is_key_material_missing(hsm: Hsm) -> None:
    with pytest.raises(KeyMaterialMissing):
        tk.tokenize(hsm, HsmObjects(f"km/{new_id()}/v1/ff1", None), TokenFormat(), CARD, b"")
