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

from keymanager.domain import key_specs
from keymanager.domain.key_specs import Algorithm, KeyUsage
from keymanager.errors import InvalidRequest, UnsupportedByHsm

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
    parameter: str | None = None
    """A parameter the token may refuse although it lists the mechanism (probed at start, see
    :mod:`keymanager.hsm.mechanism_probes`); None: the mechanism alone."""

    def describe(self) -> str:
        """The need in PKCS#11's words, e.g. ``CKM_AES_GCM (32-byte keys, ENCRYPT)``."""
        details = [] if self.parameter is None else [f"with {self.parameter}"]
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
    parameters: frozenset[tuple[Mechanism, str]] = frozenset()
    """The (mechanism, parameter) pairs the start-time probes found working (:mod:`keymanager.hsm.mechanism_probes`)."""

    def supports(
        self,
        mechanism: Mechanism,
        key_size: int | None = None,
        flag: MechanismFlag | None = None,
        parameter: str | None = None,
    ) -> bool:
        """Whether the token has ``mechanism`` for keys of ``key_size`` (its unit), use ``flag`` and
        ``parameter`` (as probed)."""
        if parameter is not None and (mechanism, parameter) not in self.parameters:
            return False
        info = self.mechanisms.get(mechanism)
        if info is None:
            return False
        if key_size is not None and not _fits(mechanism, key_size, info):
            return False
        return flag is None or not self.trust_flags or bool(info.flags & flag)

    def unmet(self, needs: Iterable[Need]) -> list[Need]:
        """The needs the token does not meet (empty: all met)."""
        return [n for n in needs if not self.supports(n.mechanism, n.key_size, n.flag, n.parameter)]

    def has(self, feature: str) -> bool:
        """Whether every need of ``feature`` (a key of :data:`FEATURES`) is met."""
        return not self.unmet(FEATURES[feature])

    def require(self, feature: str) -> None:
        """UnsupportedByHsm (400) naming the first missing mechanism unless ``feature`` is available."""
        unmet = self.unmet(FEATURES[feature])
        if unmet:
            raise UnsupportedByHsm(f"the HSM does not support {feature} (no {unmet[0].describe()})")

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


def read_capabilities(
    slot: Any, *, trust_flags: bool = True, parameters: frozenset[tuple[Mechanism, str]] = frozenset()
) -> Capabilities:
    """The capabilities of the token in ``slot`` (a python-pkcs11 slot), with the ``parameters`` its
    probes found working; mechanisms python-pkcs11 does not name (vendor-defined) are left out, since
    no feature needs them."""
    found: dict[Mechanism, MechanismInfo] = {}
    for mechanism in slot.get_mechanisms():
        if not isinstance(mechanism, Mechanism):
            continue
        info = slot.get_mechanism_info(mechanism)
        found[mechanism] = MechanismInfo(int(info.min_key_length), int(info.max_key_length), MechanismFlag(info.flags))
    return Capabilities(found, trust_flags, parameters)


def probed_needs() -> frozenset[tuple[Mechanism, str]]:
    """Every (mechanism, parameter) a feature needs: what the start-time probes must try."""
    return frozenset((n.mechanism, n.parameter) for needs in FEATURES.values() for n in needs if n.parameter)


# -- what each feature needs ------------------------------------------------------------


def need_of(mechanism: key_specs.Mechanism) -> Need:
    """The need of a mechanism as the table of key types names it."""
    flag = None if mechanism.flag is None else MechanismFlag[mechanism.flag]
    return Need(Mechanism[mechanism.name], mechanism.key_size, flag, mechanism.parameter)


def feature(algorithm: Algorithm, usage: KeyUsage | None = None, operation: str | None = None) -> str:
    """The name in :data:`FEATURES` of a key spec (a symmetric spec: its name; an asymmetric one: its
    name and ``usage``, e.g. ``RSA_2048 SIGN_VERIFY``), or of one of its algorithms (``operation``,
    e.g. ``RSA_2048 RSAES_OAEP_SHA_256``)."""
    if operation is not None:
        return f"{algorithm} {operation}"
    spec = key_specs.spec_of(algorithm)
    return str(algorithm) if not spec.asymmetric else f"{algorithm} {usage or spec.default_usage}"


def _spec_features() -> dict[str, tuple[Need, ...]]:
    """A feature per spec and usage, and per algorithm that needs mechanisms of its own, from the table."""
    found: dict[str, tuple[Need, ...]] = {}
    for algorithm, spec in key_specs.SPECS.items():
        for usage, entry in spec.usages.items():
            found[feature(algorithm, usage)] = tuple(need_of(m) for m in entry.mechanisms)
            for name, extra in entry.algorithms.items():
                if extra:
                    found[feature(algorithm, usage, name)] = tuple(need_of(m) for m in (*entry.mechanisms, *extra))
    return found


_RSA_OAEP_UNWRAP = (
    Need(Mechanism.RSA_PKCS_KEY_PAIR_GEN, 2048, MechanismFlag.GENERATE_KEY_PAIR),
    Need(Mechanism.RSA_PKCS_OAEP, 2048, MechanismFlag.UNWRAP),
)
_AUDIT_SEAL = tuple(
    need_of(m) for m in key_specs.SPECS[Algorithm.HMAC_SHA256].usage(KeyUsage.GENERATE_VERIFY_MAC).mechanisms
)

FEATURES: dict[str, tuple[Need, ...]] = {
    **_spec_features(),
    "import RSAES_OAEP_SHA_1": _RSA_OAEP_UNWRAP,
    "import RSA_AES_KEY_WRAP_SHA_1": (*_RSA_OAEP_UNWRAP, Need(Mechanism.AES_KEY_WRAP_PAD, 32, MechanismFlag.UNWRAP)),
    "audit seal": _AUDIT_SEAL,
}
"""Every feature that depends on the token, and its needs: the key specs and their algorithms from the
table of key types (:func:`feature` names them), wrapping algorithms ``import <AWS name>``, internal
uses by what they are (access-key sealing and the KMS default use one of the encryption algorithms:
:func:`sealing_algorithm`)."""

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
    """The PKCS#11 mechanism of an HMAC algorithm (one of ``HMAC_KEY_BITS``): the table's signing mechanism."""
    needs = key_specs.SPECS[algorithm].usage(KeyUsage.GENERATE_VERIFY_MAC).mechanisms
    return next(Mechanism[m.name] for m in needs if m.flag == "SIGN")
