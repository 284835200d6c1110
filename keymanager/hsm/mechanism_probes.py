"""Start-time probes of mechanism parameters a token may refuse although it lists the mechanism.

``C_GetMechanismList``/``Info`` say which mechanisms a token has and for which key sizes, not which
parameters it takes: SoftHSM 2.6.1 lists ``CKM_RSA_PKCS_OAEP`` but answers ``CKR_ARGUMENTS_BAD`` for
OAEP with SHA-256, and signs with ``CKM_EDDSA`` but ignores ``CK_EDDSA_PARAMS.phFlag`` (an
"Ed25519ph" signature equals the pure Ed25519 one). So when the first session opens, each
(mechanism, parameter) that a feature of :data:`~keymanager.hsm.capabilities.FEATURES` needs is
tried once with session objects only (nothing is stored; about 15 ms of CPU on SoftHSM, within the
first call's deadline), and what works is kept in the token's
:class:`~keymanager.hsm.capabilities.Capabilities`: a spec or algorithm needing a parameter that
failed is refused by name and listed in ``/v1/health?detail=true``. Results are kept per module and
token for the process (a re-opened session does not probe again).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from pkcs11 import MGF, Attribute, KeyType, Mechanism
from pkcs11 import exceptions as p11
from pkcs11.util.ec import encode_named_curve_parameters

from keymanager.domain.key_specs import CURVE_OIDS

log = logging.getLogger(__name__)

_SESSION = {Attribute.TOKEN: False}
_PROBE_MESSAGE = b"keymanager mechanism probe"
_PROBE_RSA_BITS = (1024, 2048)
_found: dict[tuple[str, str], frozenset[tuple[Mechanism, str]]] = {}


def _oaep(session: Any, parameter: str) -> bool:
    hash_mechanism, mgf = {"SHA256": (Mechanism.SHA256, MGF.SHA256), "SHA1": (Mechanism.SHA_1, MGF.SHA1)}[parameter]
    public, private = _rsa_pair(session)
    params = (hash_mechanism, mgf, None)
    try:
        sealed = public.encrypt(_PROBE_MESSAGE, mechanism=Mechanism.RSA_PKCS_OAEP, mechanism_param=params)
        opened = private.decrypt(sealed, mechanism=Mechanism.RSA_PKCS_OAEP, mechanism_param=params)
        return bytes(opened) == _PROBE_MESSAGE
    finally:
        _destroy(public, private)


def _rsa_pair(session: Any) -> tuple[Any, Any]:
    """A session RSA key pair for a probe: 1,024 bits (a tenth of 2,048's generation time, which counts
    against the deadline of the first HSM call), 2,048 where the token refuses that size."""
    for bits in _PROBE_RSA_BITS:
        try:
            return session.generate_keypair(  # type: ignore[no-any-return]
                KeyType.RSA,
                bits,
                mechanism=Mechanism.RSA_PKCS_KEY_PAIR_GEN,
                public_template={**_SESSION, Attribute.ENCRYPT: True},
                private_template={**_SESSION, Attribute.DECRYPT: True},
            )
        except p11.KeySizeRange:
            continue
    raise p11.KeySizeRange()


def _curve(mechanism: Mechanism) -> Callable[[Any, str], bool]:
    key_type = KeyType.EC_EDWARDS if mechanism is Mechanism.EC_EDWARDS_KEY_PAIR_GEN else KeyType.EC

    def probe(session: Any, curve: str) -> bool:
        public, private = _pair(session, key_type, mechanism, curve)
        _destroy(public, private)
        return True

    return probe


def _ed25519ph(session: Any, parameter: str) -> bool:
    public, private = _pair(session, KeyType.EC_EDWARDS, Mechanism.EC_EDWARDS_KEY_PAIR_GEN, "ed25519")
    try:
        digest = hashlib.sha512(_PROBE_MESSAGE).digest()
        prehashed = private.sign(digest, mechanism=Mechanism.EDDSA, mechanism_param=(True, None))
        pure = private.sign(digest, mechanism=Mechanism.EDDSA)
        return bool(prehashed) and bytes(prehashed) != bytes(pure)  # a module that ignores phFlag signs pure
    finally:
        _destroy(public, private)


_PROBES: dict[Mechanism, Callable[[Any, str], bool]] = {
    Mechanism.RSA_PKCS_OAEP: _oaep,
    Mechanism.EC_KEY_PAIR_GEN: _curve(Mechanism.EC_KEY_PAIR_GEN),
    Mechanism.EC_EDWARDS_KEY_PAIR_GEN: _curve(Mechanism.EC_EDWARDS_KEY_PAIR_GEN),
    Mechanism.EDDSA: _ed25519ph,
}
"""How each probed mechanism is tried with a parameter (a mechanism without a probe never works)."""


def working_parameters(
    module: str, token: Any, session: Any, needs: Iterable[tuple[Mechanism, str]]
) -> frozenset[tuple[Mechanism, str]]:
    """The (mechanism, parameter) pairs of ``needs`` that work on ``token`` (tried in ``session`` with
    session objects, once per module and token for the process)."""
    cache_key = (module, str(token.label))
    known = _found.get(cache_key)
    if known is not None:
        return known
    mechanisms = set(token.slot.get_mechanisms())
    working = frozenset(
        (mechanism, parameter)
        for mechanism, parameter in sorted(needs, key=lambda n: (n[0].name, n[1]))
        if mechanism in mechanisms and _works(session, mechanism, parameter)
    )
    _found[cache_key] = working
    return working


def _works(session: Any, mechanism: Mechanism, parameter: str) -> bool:
    probe = _PROBES.get(mechanism)
    if probe is None:
        return False
    try:
        return probe(session, parameter)
    except p11.PKCS11Error as exc:
        log.info("the HSM refuses CKM_%s with %s (%s)", mechanism.name, parameter, type(exc).__name__)
        return False


def _pair(session: Any, key_type: KeyType, mechanism: Mechanism, curve: str) -> tuple[Any, Any]:
    return session.generate_keypair(  # type: ignore[no-any-return]
        key_type,
        mechanism=mechanism,
        public_template={**_SESSION, Attribute.EC_PARAMS: ec_parameters(curve), Attribute.VERIFY: True},
        private_template={**_SESSION, Attribute.SIGN: True},
    )


def ec_parameters(curve: str) -> bytes:
    """The DER ``ECParameters`` (a named curve's OID) of ``curve`` (``secp256r1``, …, ``ed25519``)."""
    return encode_named_curve_parameters(CURVE_OIDS[curve])


def _destroy(*objects: Any) -> None:
    for obj in objects:
        try:
            obj.destroy()
        except p11.PKCS11Error:
            continue
