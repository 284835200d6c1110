"""Capabilities read from the token: each feature is available exactly when its mechanisms are, an
algorithm the token lacks is refused by name at creation, and every new object is read back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pkcs11 import Attribute, Mechanism, MechanismFlag

from keymanager.domain.credentials import new_id
from keymanager.domain.key_specs import SYMMETRIC
from keymanager.domain.models import Algorithm
from keymanager.errors import InvalidRequest
from keymanager.hsm import Hsm
from keymanager.hsm.capabilities import FEATURES, Capabilities, MechanismInfo, Need, sealing_algorithm
from keymanager.hsm.readback import TemplateNotHonoured

pytestmark = pytest.mark.softhsm


def _without(hsm: Hsm, *absent: Mechanism) -> Capabilities:
    real = hsm.capabilities()
    return Capabilities({m: i for m, i in real.mechanisms.items() if m not in absent}, real.trust_flags)


@pytest.fixture
def lacking(hsm: Hsm, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make the adapter see the token without some mechanisms (a fault injected into what it read)."""

    def lack(*absent: Mechanism) -> None:
        monkeypatch.setattr(hsm._token, "_capabilities", _without(hsm, *absent))

    yield lack


def test_each_feature_is_available_exactly_when_the_token_lists_its_mechanisms(hsm: Hsm) -> None:
    listed = hsm.call(lambda token: set(token.session().token.slot.get_mechanisms()))
    capabilities = hsm.capabilities()
    summary = capabilities.summary()
    assert set(summary["supported"]) | set(summary["unsupported"]) == set(FEATURES)
    probed = capabilities.parameters

    def met(need: Need) -> bool:
        return need.mechanism in listed and (need.parameter is None or (need.mechanism, need.parameter) in probed)

    for feature, needs in FEATURES.items():
        listed_all = all(met(need) for need in needs)
        assert capabilities.has(feature) is listed_all, feature
        if not listed_all:
            missing = next(n for n in needs if not met(n))
            assert f"CKM_{missing.mechanism.name}" in summary["unsupported"][feature]


def test_every_algorithm_the_token_has_generates_and_every_other_is_refused_by_name(hsm: Hsm) -> None:
    capabilities = hsm.capabilities()
    for algorithm in SYMMETRIC:
        key_id = new_id()
        if capabilities.has(algorithm.value):
            hsm.destroy_version(hsm.generate_version(key_id, 1, algorithm))
        else:
            unmet = capabilities.unmet(FEATURES[algorithm.value])
            with pytest.raises(InvalidRequest, match=f"{algorithm.value} .no CKM_{unmet[0].mechanism.name}"):
                hsm.generate_version(key_id, 1, algorithm)
        assert hsm.find_labels(f"km/{key_id}/") == []


@pytest.mark.parametrize(
    ("algorithm", "absent"),
    [
        (Algorithm.AES_256_GCM, Mechanism.AES_GCM),
        (Algorithm.AES_256_CBC_HMAC_SHA256, Mechanism.AES_CBC_PAD),
        (Algorithm.AES_256_CBC_HMAC_SHA256, Mechanism.SHA256_HMAC),
        (Algorithm.HMAC_SHA384, Mechanism.SHA384_HMAC),
        (Algorithm.FF1_AES_256, Mechanism.AES_CBC),
    ],
)
def test_an_algorithm_whose_mechanism_is_missing_is_refused_by_name(
    hsm: Hsm, lacking: Any, algorithm: Algorithm, absent: Mechanism
) -> None:
    lacking(absent)
    before = hsm.find_labels("km/")
    with pytest.raises(InvalidRequest, match=f"{algorithm.value} .no CKM_{absent.name}"):
        hsm.generate_version(new_id(), 1, algorithm)
    assert hsm.find_labels("km/") == before
    assert not hsm.outcome.failing
    hsm.ping()


def test_key_sizes_and_flags_are_asked_as_the_token_states_them() -> None:
    aes = MechanismInfo(16, 32, MechanismFlag.ENCRYPT | MechanismFlag.DECRYPT)
    in_bits = MechanismInfo(128, 256, MechanismFlag.ENCRYPT)
    rsa = MechanismInfo(1024, 4096, MechanismFlag.UNWRAP)
    caps = Capabilities({Mechanism.AES_GCM: aes, Mechanism.AES_CBC: in_bits, Mechanism.RSA_PKCS_OAEP: rsa})
    assert caps.supports(Mechanism.AES_GCM, 32, MechanismFlag.ENCRYPT)
    assert not caps.supports(Mechanism.AES_GCM, 64)
    assert not caps.supports(Mechanism.AES_GCM, 32, MechanismFlag.SIGN)
    assert caps.supports(Mechanism.AES_CBC, 32)  # a module that gives AES sizes in bits
    assert caps.supports(Mechanism.RSA_PKCS_OAEP, 2048, MechanismFlag.UNWRAP)
    assert not caps.supports(Mechanism.RSA_PKCS_OAEP, 8192)
    assert not caps.supports(Mechanism.AES_CTR)
    untrusted = Capabilities(caps.mechanisms, trust_flags=False)
    assert untrusted.supports(Mechanism.AES_GCM, 32, MechanismFlag.SIGN)
    assert Need(Mechanism.AES_GCM, 32, MechanismFlag.ENCRYPT).describe() == "CKM_AES_GCM (32-byte keys, ENCRYPT)"


def test_sealing_follows_the_token(hsm: Hsm, lacking: Any) -> None:
    full = hsm.capabilities()
    assert sealing_algorithm(full) is (
        Algorithm.AES_256_GCM if full.has("AES_256_GCM") else Algorithm.AES_256_CBC_HMAC_SHA256
    )
    lacking(Mechanism.AES_GCM)
    assert sealing_algorithm(hsm.capabilities()) is Algorithm.AES_256_CBC_HMAC_SHA256
    lacking(Mechanism.AES_GCM, Mechanism.AES_CBC_PAD)
    with pytest.raises(InvalidRequest, match=r"CKM_AES_GCM.*CKM_AES_CBC_PAD"):
        sealing_algorithm(hsm.capabilities())


class _IgnoringTemplate:
    """A session whose token ignores one attribute of every template given to C_GenerateKey."""

    def __init__(self, session: Any, attribute: Attribute, value: bool) -> None:
        self._session, self._attribute, self._value = session, attribute, value

    def generate_key(self, *args: Any, template: dict[Attribute, Any], **kwargs: Any) -> Any:
        return self._session.generate_key(*args, template={**template, self._attribute: self._value}, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@pytest.mark.parametrize(
    ("attribute", "value"),
    [(Attribute.SENSITIVE, False), (Attribute.EXTRACTABLE, True), (Attribute.PRIVATE, False), (Attribute.SIGN, True)],
)
def test_a_key_the_hsm_made_other_than_asked_is_destroyed_and_refused_naming_the_attribute(
    hsm: Hsm, monkeypatch: pytest.MonkeyPatch, attribute: Attribute, value: bool
) -> None:
    real = hsm.call(lambda token: token.session())
    monkeypatch.setattr(hsm._token, "session", lambda: _IgnoringTemplate(real, attribute, value))
    key_id = new_id()
    with pytest.raises(TemplateNotHonoured, match=f"CKA_{attribute.name}") as info:
        hsm.generate_version(key_id, 1, Algorithm.AES_256_CBC_HMAC_SHA256)
    assert info.value.status == 503 and info.value.code == "hsm_unavailable"
    monkeypatch.undo()
    assert hsm.find_labels(f"km/{key_id}/") == []
    assert not hsm.outcome.failing  # a configuration fault: the token answered


def test_generated_keys_read_back_as_asked(hsm: Hsm) -> None:
    objects = hsm.generate_version(new_id(), 1, Algorithm.AES_256_CBC_HMAC_SHA256)

    def read(token: Any, label: str | None) -> tuple[Any, ...]:
        obj = token.session().get_key(label=label)
        wanted = (Attribute.TOKEN, Attribute.PRIVATE, Attribute.SENSITIVE, Attribute.EXTRACTABLE, Attribute.VALUE_LEN)
        return tuple(obj[a] for a in wanted)

    try:
        assert hsm.call(read, objects.enc_label) == (True, True, True, False, 32)
        assert hsm.call(read, objects.mac_label) == (True, True, True, False, 32)
    finally:
        hsm.destroy_version(objects)
