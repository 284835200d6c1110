"""Key import into SoftHSM: wrapping key pairs, unwrapping inside the HSM, refusals, attributes read back."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.keywrap import aes_key_wrap_with_padding
from pkcs11 import Attribute, Mechanism, ObjectClass

from keymanager.domain.credentials import new_id
from keymanager.domain.models import Algorithm, HsmObjects
from keymanager.errors import Conflict, InvalidRequest
from keymanager.hsm import Hsm
from keymanager.hsm import import_parameters as ip
from keymanager.hsm import key_import as ki
from keymanager.hsm import tokenization as tk
from keymanager.hsm.capabilities import Capabilities
from tests.domain.test_ff1 import KEY_256

pytestmark = pytest.mark.softhsm


def wrap(params: ip.ImportParameters, algorithm: ip.WrappingAlgorithm, material: bytes) -> bytes:
    """What a client does: encrypt the material under the service's RSA public key (test-side software)."""
    public = serialization.load_der_public_key(params.public_key)
    assert isinstance(public, rsa.RSAPublicKey)
    oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA1()), algorithm=hashes.SHA1(), label=None)  # noqa: S303
    if algorithm is ip.WrappingAlgorithm.RSAES_OAEP_SHA_1:
        return public.encrypt(material, oaep)
    ephemeral = os.urandom(32)
    return public.encrypt(ephemeral, oaep) + aes_key_wrap_with_padding(ephemeral, material)


@pytest.fixture
def made(hsm: Hsm) -> Iterator[list[HsmObjects]]:
    objects: list[HsmObjects] = []
    yield objects
    for one in objects:
        hsm.destroy_version(one)


def _private_labels(token: Any, key_id: str) -> list[str]:
    found = token.session().get_objects({Attribute.CLASS: ObjectClass.PRIVATE_KEY, Attribute.TOKEN: True})
    return [o[Attribute.LABEL] for o in found if key_id in o[Attribute.LABEL]]


def _read(token: Any, label: str) -> dict[str, Any]:
    template = {Attribute.CLASS: ObjectClass.SECRET_KEY, Attribute.LABEL: label, Attribute.TOKEN: True}
    (key,) = token.session().get_objects(template)
    names = ["SENSITIVE", "EXTRACTABLE", "ENCRYPT", "DECRYPT", "SIGN", "WRAP", "UNWRAP", "PRIVATE"]
    return {name: key[Attribute[name]] for name in names}


@pytest.mark.parametrize("wrapping", list(ip.WrappingAlgorithm))
def test_nist_key_imported_gives_the_nist_samples(
    hsm: Hsm, made: list[HsmObjects], wrapping: ip.WrappingAlgorithm
) -> None:
    key_id = new_id()
    if not hsm.capabilities().has(wrapping.feature):  # the token lacks it: refused by name
        with pytest.raises(InvalidRequest, match=f"{wrapping.value} .no CKM_"):
            ip.make_parameters(hsm, key_id, wrapping)
        return
    params = ip.make_parameters(hsm, key_id, wrapping)
    assert params.public_key[:1] == b"\x30"
    assert hsm.call(_private_labels, key_id) == [f"km/import/{key_id}/{params.import_token}"]
    objects = ki.unwrap_version(
        hsm,
        key_id,
        1,
        Algorithm.FF1_AES_256,
        ki.EncryptedKeyMaterial(params.import_token, [wrap(params, wrapping, KEY_256)]),
    )
    made.append(objects)
    assert tk.ff1_encrypt_text(hsm, objects, 10, "0123456789", b"") == "6657667009"
    assert hsm.call(_read, objects.enc_label) == {
        "SENSITIVE": True,
        "EXTRACTABLE": False,
        "ENCRYPT": True,
        "DECRYPT": False,
        "SIGN": False,
        "WRAP": False,
        "UNWRAP": False,
        "PRIVATE": True,
    }
    assert hsm.call(_private_labels, key_id) == []  # the wrapping key is single-use
    with pytest.raises(InvalidRequest, match="unknown, used already"):
        ki.unwrap_version(
            hsm,
            key_id,
            2,
            Algorithm.FF1_AES_256,
            ki.EncryptedKeyMaterial(params.import_token, [wrap(params, wrapping, KEY_256)]),
        )


def test_two_part_and_hmac_keys(hsm: Hsm, made: list[HsmObjects]) -> None:
    key_id = new_id()
    params = ip.make_parameters(hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1)
    parts = [wrap(params, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1, os.urandom(32)) for _ in range(2)]
    objects = ki.unwrap_version(
        hsm, key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256, ki.EncryptedKeyMaterial(params.import_token, parts)
    )
    made.append(objects)
    assert objects.enc_label and objects.mac_label
    assert hsm.call(_read, objects.enc_label)["DECRYPT"] is True
    assert hsm.call(_read, objects.mac_label)["SIGN"] is True
    assert hsm.call(_read, objects.mac_label)["EXTRACTABLE"] is False


def test_refusals_leave_nothing_behind(hsm: Hsm) -> None:
    key_id = new_id()
    params = ip.make_parameters(hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1)
    good = wrap(params, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1, KEY_256)
    short = wrap(params, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1, KEY_256[:16])
    cases = [
        ("not-a-token", [good], "not an import token"),
        (params.import_token.replace(params.import_token[-4:], "0000"), [good], "unknown"),
        (params.import_token, [short], "must be exactly 32 bytes"),
        (params.import_token, [bytes(256)], "does not unwrap"),
        (params.import_token, [good, good], "takes 1"),
    ]
    for token, materials, rule in cases:
        with pytest.raises(InvalidRequest, match=rule):
            ki.unwrap_version(hsm, key_id, 1, Algorithm.AES_256_GCM, ki.EncryptedKeyMaterial(token, materials))
    assert hsm.find_labels(f"km/{key_id}/") == []
    with pytest.raises(InvalidRequest, match="expired"):
        ki.unwrap_version(
            hsm,
            key_id,
            1,
            Algorithm.AES_256_GCM,
            ki.EncryptedKeyMaterial(params.import_token, [good]),
            now=params.expires_at,
        )
    # New parameters a day later sweep the expired pair.
    later = ip.make_parameters(hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1, now=params.expires_at + 1)
    assert hsm.call(_private_labels, key_id) == [f"km/import/{key_id}/{later.import_token}"]


def test_outstanding_parameters_are_bounded(hsm: Hsm) -> None:
    key_id = new_id()
    for _ in range(ip.MAX_OUTSTANDING):
        ip.make_parameters(hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1)
    with pytest.raises(Conflict, match="at most 10 unused import parameters"):
        ip.make_parameters(hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1)
    later = ip.make_parameters(
        hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1, now=time.time() + ip.PARAMETERS_SECONDS
    )
    assert hsm.call(_private_labels, key_id) == [f"km/import/{key_id}/{later.import_token}"]
    hsm.call(_destroy_all, key_id)


def _destroy_all(token: Any, key_id: str) -> None:
    for obj in list(token.session().get_objects({Attribute.CLASS: ObjectClass.PRIVATE_KEY, Attribute.TOKEN: True})):
        if key_id in obj[Attribute.LABEL]:
            obj.destroy()


def test_only_the_wrapping_algorithms_the_token_has_are_offered(hsm: Hsm, monkeypatch: pytest.MonkeyPatch) -> None:
    capabilities = hsm.capabilities()
    assert ip.wrapping_algorithms(hsm) == [a for a in ip.WrappingAlgorithm if capabilities.has(a.feature)]
    lacking = Capabilities(
        {m: i for m, i in capabilities.mechanisms.items() if m is not Mechanism.AES_KEY_WRAP_PAD},
        capabilities.trust_flags,
    )
    monkeypatch.setattr(hsm._token, "_capabilities", lacking)
    assert ip.WrappingAlgorithm.RSA_AES_KEY_WRAP_SHA_1 not in ip.wrapping_algorithms(hsm)
    with pytest.raises(InvalidRequest, match=r"RSA_AES_KEY_WRAP_SHA_1 .no CKM_AES_KEY_WRAP_PAD"):
        ip.make_parameters(hsm, new_id(), ip.WrappingAlgorithm.RSA_AES_KEY_WRAP_SHA_1)


class _UnwrapIgnoresSensitive:
    """A wrapping key whose token makes unwrapped keys non-sensitive whatever the template says
    (as openCryptoki 3.8 does): a fault injected in front of the real object."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def unwrap_key(self, *args: Any, template: dict[Attribute, Any], **kwargs: Any) -> Any:
        return self._real.unwrap_key(*args, template={**template, Attribute.SENSITIVE: False}, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_an_unwrapped_key_left_non_sensitive_is_made_sensitive_before_use(
    hsm: Hsm, made: list[HsmObjects], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ki._rsa_unwrap
    monkeypatch.setattr(ki, "_rsa_unwrap", lambda w, *a: real(_UnwrapIgnoresSensitive(w), *a))
    key_id = new_id()
    params = ip.make_parameters(hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1)
    blob = wrap(params, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1, os.urandom(32))
    try:
        objects = ki.unwrap_version(
            hsm, key_id, 1, Algorithm.HMAC_SHA256, ki.EncryptedKeyMaterial(params.import_token, [blob])
        )
    except InvalidRequest as refused:  # a token may refuse CKA_SENSITIVE false in an unwrap template
        assert "does not unwrap" in refused.message
        assert hsm.find_labels(f"km/{key_id}/") == []
        hsm.call(_destroy_all, key_id)
        return
    assert objects is not None
    made.append(objects)
    assert hsm.call(_read, objects.mac_label)["SENSITIVE"] is True


def test_the_known_answer_check_refuses_material_that_does_not_work(hsm: Hsm) -> None:
    """25 bytes as an AES key: on a token that reports lengths, refused by length; on SoftHSM (measured
    to 8 bytes) by the known-answer encryption. Either way the message names the length."""
    key_id = new_id()
    params = ip.make_parameters(hsm, key_id, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1)
    blob = wrap(params, ip.WrappingAlgorithm.RSAES_OAEP_SHA_1, os.urandom(25))
    with pytest.raises(InvalidRequest, match="exactly 32 bytes"):
        ki.unwrap_version(
            hsm,
            key_id,
            1,
            Algorithm.AES_256_CBC_HMAC_SHA256,
            ki.EncryptedKeyMaterial(params.import_token, [blob, blob]),
        )
    assert hsm.find_labels(f"km/{key_id}/") == []
    hsm.call(_destroy_all, key_id)
