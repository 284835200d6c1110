"""What the token can do, read from it once, and what each feature of the service needs of it.

:func:`read_capabilities` asks the token for its mechanism list and each mechanism's info
(``C_GetMechanismList``, ``C_GetMechanismInfo``: flags and key sizes) and gives one
:class:`Capabilities`. :data:`FEATURES` is the one table of what every algorithm, wrapping
algorithm and internal use needs (a tuple of :class:`Need`); a feature is available exactly
when the token meets all its needs. Everything that depends on a mechanism asks this object:
key creation (:meth:`Capabilities.require`), the wrapping algorithms import parameters offer,
access-key sealing, the KMS default, ``/v1/health?detail=true`` and ``keymanager init``.

Key sizes are in the unit ``CK_MECHANISM_INFO`` uses for the mechanism's key type: bytes for AES
and generic secrets, bits for RSA and EC. Some modules report symmetric sizes in bits; a size
fits when it fits in either reading. Some modules report garbage flags (SoftHSM 2.6.1 leaves
``ulFlags`` uninitialised for its AES mechanisms): flags are checked only when the module's
quirks trust them (:mod:`keymanager.hsm.quirks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pkcs11 import Mechanism, MechanismFlag

from keymanager.domain.models import HMAC_KEY_BITS, Algorithm
from keymanager.errors import InvalidRequest

_BYTE_SIZED = frozenset(
    {
        Mechanism.AES_KEY_GEN,
        Mechanism.AES_CBC,
        Mechanism.AES_CBC_PAD,
        Mechanism.AES_ECB,
        Mechanism.AES_GCM,
        Mechanism.AES_KEY_WRAP,
        Mechanism.AES_KEY_WRAP_PAD,
        Mechanism.GENERIC_SECRET_KEY_GEN,
        Mechanism.SHA224_HMAC,
        Mechanism.SHA256_HMAC,
        Mechanism.SHA384_HMAC,
        Mechanism.SHA512_HMAC,
    }
)
"""Mechanisms whose key sizes PKCS#11 gives in bytes (the others: in bits)."""


@dataclass(frozen=True)
class Need:
    """One mechanism a feature needs: with keys of ``key_size`` (the mechanism's unit, see the module
    docstring; None: any) and the ``flag`` it is used for (None: any use)."""

    mechanism: Mechanism
    key_size: int | None = None
    flag: MechanismFlag | None = None

    def describe(self) -> str:
        """The need in PKCS#11's words, e.g. ``CKM_AES_GCM (32-byte keys, ENCRYPT)``."""
        details = []
        if self.key_size is not None:
            unit = "byte" if self.mechanism in _BYTE_SIZED else "bit"
            details.append(f"{self.key_size}-{unit} keys")
        if self.flag is not None:
            details.append(str(self.flag.name))
        return f"CKM_{self.mechanism.name}" + (f" ({', '.join(details)})" if details else "")


@dataclass(frozen=True)
class MechanismInfo:
    """A mechanism as the token describes it."""

    min_key_size: int
    max_key_size: int
    flags: MechanismFlag


@dataclass(frozen=True)
class Capabilities:
    """The token's mechanisms; answers "does the token have mechanism X with key size Y for use Z"."""

    mechanisms: Mapping[Mechanism, MechanismInfo] = field(default_factory=dict)
    trust_flags: bool = True
    """Whether the module's mechanism flags mean what they say (see :mod:`keymanager.hsm.quirks`)."""

    def supports(self, mechanism: Mechanism, key_size: int | None = None, flag: MechanismFlag | None = None) -> bool:
        """Whether the token has ``mechanism`` for keys of ``key_size`` (its unit) and use ``flag``."""
        info = self.mechanisms.get(mechanism)
        if info is None:
            return False
        if key_size is not None and not _fits(mechanism, key_size, info):
            return False
        return flag is None or not self.trust_flags or bool(info.flags & flag)

    def unmet(self, needs: Iterable[Need]) -> list[Need]:
        """The needs the token does not meet (empty: all met)."""
        return [n for n in needs if not self.supports(n.mechanism, n.key_size, n.flag)]

    def has(self, feature: str) -> bool:
        """Whether every need of ``feature`` (a key of :data:`FEATURES`) is met."""
        return not self.unmet(FEATURES[feature])

    def require(self, feature: str) -> None:
        """InvalidRequest naming the first missing mechanism unless ``feature`` is available."""
        unmet = self.unmet(FEATURES[feature])
        if unmet:
            raise InvalidRequest(f"the HSM does not support {feature} (no {unmet[0].describe()})")

    def summary(self) -> dict[str, Any]:
        """What the token can and cannot do: ``{"supported": [features], "unsupported": {feature: why}}``."""
        supported, unsupported = [], {}
        for feature, needs in FEATURES.items():
            unmet = self.unmet(needs)
            if unmet:
                unsupported[feature] = "no " + ", ".join(n.describe() for n in unmet)
            else:
                supported.append(feature)
        return {"supported": supported, "unsupported": unsupported}


def _fits(mechanism: Mechanism, key_size: int, info: MechanismInfo) -> bool:
    if info.max_key_size == 0:  # the module does not say
        return True
    sizes = (key_size, key_size * 8) if mechanism in _BYTE_SIZED else (key_size,)
    return any(info.min_key_size <= size <= info.max_key_size for size in sizes)


def read_capabilities(slot: Any, *, trust_flags: bool = True) -> Capabilities:
    """The capabilities of the token in ``slot`` (a python-pkcs11 slot); mechanisms python-pkcs11 does not
    name (vendor-defined) are left out, since no feature needs them."""
    found: dict[Mechanism, MechanismInfo] = {}
    for mechanism in slot.get_mechanisms():
        if not isinstance(mechanism, Mechanism):
            continue
        info = slot.get_mechanism_info(mechanism)
        found[mechanism] = MechanismInfo(int(info.min_key_length), int(info.max_key_length), MechanismFlag(info.flags))
    return Capabilities(found, trust_flags)


# -- what each feature needs ------------------------------------------------------------

_E, _D, _S, _V = MechanismFlag.ENCRYPT, MechanismFlag.DECRYPT, MechanismFlag.SIGN, MechanismFlag.VERIFY
_AES_KEY = Need(Mechanism.AES_KEY_GEN, 32, MechanismFlag.GENERATE)
_HMAC_MECHANISMS = {
    Algorithm.HMAC_SHA224: Mechanism.SHA224_HMAC,
    Algorithm.HMAC_SHA256: Mechanism.SHA256_HMAC,
    Algorithm.HMAC_SHA384: Mechanism.SHA384_HMAC,
    Algorithm.HMAC_SHA512: Mechanism.SHA512_HMAC,
}
_HMAC_BYTES = {a: bits // 8 for a, bits in HMAC_KEY_BITS.items()}


def _hmac(algorithm: Algorithm) -> tuple[Need, ...]:
    size = _HMAC_BYTES[algorithm]
    return (
        Need(Mechanism.GENERIC_SECRET_KEY_GEN, size, MechanismFlag.GENERATE),
        Need(_HMAC_MECHANISMS[algorithm], size, _S),
    )


_CBC_HMAC = (
    _AES_KEY,
    Need(Mechanism.AES_CBC_PAD, 32, _E),
    Need(Mechanism.AES_CBC_PAD, 32, _D),
    *_hmac(Algorithm.HMAC_SHA256),
)
_GCM = (_AES_KEY, Need(Mechanism.AES_GCM, 32, _E), Need(Mechanism.AES_GCM, 32, _D))
_RSA_OAEP_UNWRAP = (
    Need(Mechanism.RSA_PKCS_KEY_PAIR_GEN, 2048, MechanismFlag.GENERATE_KEY_PAIR),
    Need(Mechanism.RSA_PKCS_OAEP, 2048, MechanismFlag.UNWRAP),
)

FEATURES: dict[str, tuple[Need, ...]] = {
    Algorithm.AES_256_CBC_HMAC_SHA256.value: _CBC_HMAC,
    Algorithm.AES_256_GCM.value: _GCM,
    Algorithm.FF1_AES_256.value: (_AES_KEY, Need(Mechanism.AES_CBC, 32, _E)),
    **{a.value: _hmac(a) for a in _HMAC_MECHANISMS},
    "import RSAES_OAEP_SHA_1": _RSA_OAEP_UNWRAP,
    "import RSA_AES_KEY_WRAP_SHA_1": (*_RSA_OAEP_UNWRAP, Need(Mechanism.AES_KEY_WRAP_PAD, 32, MechanismFlag.UNWRAP)),
    "audit seal": _hmac(Algorithm.HMAC_SHA256),
}
"""Every feature that depends on the token, and its needs. Algorithms are named by their API names,
wrapping algorithms ``import <AWS name>``; internal uses by what they are (access-key sealing and the
KMS default use one of the encryption algorithms: :func:`sealing_algorithm`)."""

SEALING_PREFERENCE = (Algorithm.AES_256_GCM, Algorithm.AES_256_CBC_HMAC_SHA256)
"""The authenticated schemes that seal service secrets (access-key secrets) and back the KMS
``SYMMETRIC_DEFAULT``, best first."""


def sealing_algorithm(capabilities: Capabilities) -> Algorithm:
    """The first of :data:`SEALING_PREFERENCE` the token supports; InvalidRequest naming what is
    missing when none is (a token that cannot seal cannot serve access keys)."""
    available = [a for a in SEALING_PREFERENCE if capabilities.has(a.value)]
    if not available:
        why = "; ".join(capabilities.summary()["unsupported"][a.value] for a in SEALING_PREFERENCE)
        raise InvalidRequest(f"the HSM supports no authenticated scheme to seal secrets ({why})")
    return available[0]


def hmac_mechanism(algorithm: Algorithm) -> Mechanism:
    """The PKCS#11 mechanism of an HMAC algorithm (one of ``HMAC_KEY_BITS``)."""
    return _HMAC_MECHANISMS[algorithm]
