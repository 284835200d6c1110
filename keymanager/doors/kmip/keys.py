"""Create, Activate, Revoke, Destroy and Get of symmetric keys: KMIP's lifecycle on the keys of the services.

A KMIP key is one of ours: Create makes an AES key of the length asked, one AES object in the HSM,
non-extractable, of one mode (issue 41: one key, one mode): raw AES-CBC-PAD (``AES_*_CBC_PAD``,
used only by KMIP's Encrypt and Decrypt) unless the Cryptographic Parameters of its template name
GCM (``AES_*_GCM``, which the other doors use too); named
``kmip-<random>``, owned by its creator (its policy names the creator for encrypt and decrypt) and
Pre-Active (disabled until Activate). Its unique identifier is the key's
id. States map as ``domain/models.py`` ``Lifecycle`` says: Activate enables a pre-active key,
Revoke disables it (Deactivated, or Compromised with the reason ``Key Compromise``: terminal, no
door enables it again), Destroy schedules its deletion after ``KM_MIN_PENDING_DAYS``, as the other
doors' shortest window (refused while it is Active, as the specification says). Who may manage a
key is :func:`~keymanager.services.authorization.require_owner`'s say; who may use or read it, its
policy's (``services/keys.py`` ``visible``). Get answers ``Permission Denied`` for a key whose
material never leaves the HSM, saying so.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from keymanager.domain.credentials import new_id
from keymanager.domain.key_specs import ONE_AES_OBJECT, SPECS, BlockMode, KeyUsage, spec_of
from keymanager.domain.models import Algorithm, Key, KeyState, Lifecycle, Origin
from keymanager.domain.policy import Operation, Policy
from keymanager.doors.kmip import attributes as attrs
from keymanager.doors.kmip import spec
from keymanager.doors.kmip.calls import KmipCall
from keymanager.doors.kmip.refusals import (
    NO_OBJECT,
    KmipRefusal,
    Reason,
    denied,
    invalid,
    not_supported,
    wrong_state,
)
from keymanager.doors.kmip.requests import (
    Created,
    CreateRequest,
    GetRequest,
    Got,
    Identified,
    Named,
    RegisterRequest,
    RevokeRequest,
)
from keymanager.errors import Forbidden, KeyNotFound
from keymanager.hsm import Hsm
from keymanager.hsm.token import EXPORTABLE_SUFFIX
from keymanager.services.authorization import authorize, require_owner
from keymanager.services.key_creation import InitialFacts, NewKey
from keymanager.services.keys import KeyService, LifecycleChange, visible
from keymanager.services.lifecycle import LifecycleService
from keymanager.services.snapshot import MetadataCache


def _kmip_names() -> dict[Algorithm, tuple[spec.CryptographicAlgorithm, int]]:
    """KMIP's Cryptographic Algorithm and Length of each spec of the table KMIP names: the row's
    ``kmip_algorithm`` and ``kmip_length``."""
    return {
        row.algorithm: (spec.CryptographicAlgorithm[row.kmip_algorithm], row.kmip_length or 0)
        for row in SPECS.values()
        if row.kmip_algorithm is not None
    }


KMIP_NAMES = _kmip_names()
"""Each key type's KMIP algorithm and length (what GetAttributes answers; see :func:`_kmip_names`)."""
EC_ALIASES = (spec.CryptographicAlgorithm.ECDSA, spec.CryptographicAlgorithm.ECDH)
"""Algorithms clients also name an EC key pair by (KMIP's ``EC`` is the key's own)."""


def _key_types() -> dict[tuple[spec.CryptographicAlgorithm, int], Algorithm]:
    """KMIP's algorithm and length to the key type Create or CreateKeyPair makes: :data:`KMIP_NAMES`
    the other way, an EC pair also by ECDSA and ECDH; the first spec of a length wins (a 256-bit
    ``EC`` pair is P-256, not secp256k1, which KMIP's Cryptographic Length cannot tell apart)."""
    found: dict[tuple[spec.CryptographicAlgorithm, int], Algorithm] = {}
    for algorithm, (kmip, bits) in KMIP_NAMES.items():
        for name in (kmip, *EC_ALIASES) if kmip is spec.CryptographicAlgorithm.EC else (kmip,):
            found.setdefault((name, bits), algorithm)
    return found


KEY_TYPES = _key_types()
"""KMIP's algorithm and length to our key type (see :func:`_key_types`)."""
KMIP_AES = frozenset(a for a in KMIP_NAMES if spec_of(a).mode in ONE_AES_OBJECT)
"""The key types of KMIP's AES keys (what Create and Register make, what Encrypt and Decrypt use)."""


def aes_type(bits: int, server: dict[str, Any]) -> Algorithm:
    """The AES key type a Create or Register of ``bits`` makes: AES-GCM when the Cryptographic
    Parameters it names say GCM, else raw AES-CBC-PAD (what libmongocrypt and PyKMIP then encrypt
    with); one key, one mode: the key is used in no other."""
    parameters = server.get(spec.AttributeType.CRYPTOGRAPHIC_PARAMETERS.value)
    block = getattr(parameters, "block_cipher_mode", None)
    if block not in (None, spec.BlockCipherMode.CBC, spec.BlockCipherMode.GCM):
        raise invalid(f"AES keys are made for CBC with PKCS5 padding or GCM, not {block.name}")
    mode = BlockMode.GCM if block == spec.BlockCipherMode.GCM else BlockMode.CBC_PAD
    found = next((a for a in KMIP_AES if spec_of(a).mode is mode and spec_of(a).key_bits == bits), None)
    if found is None:
        raise invalid(f"AES-{bits} keys are not offered (AES-128, AES-192 and AES-256 are)")
    return found


OWNER_USES = {
    KeyUsage.ENCRYPT_DECRYPT: (Operation.ENCRYPT, Operation.DECRYPT),
    KeyUsage.GENERATE_VERIFY_MAC: (Operation.MAC,),
    KeyUsage.SIGN_VERIFY: (Operation.SIGN, Operation.VERIFY, Operation.GET_PUBLIC_KEY),
    KeyUsage.KEY_AGREEMENT: (Operation.DERIVE_SHARED_SECRET, Operation.GET_PUBLIC_KEY),
}
"""What a key's creator may do with it, by the key's usage (its policy names it)."""
KMIP_NAME_PREFIX = "kmip-"
"""Keys created through KMIP are named ``kmip-<random>``; their KMIP names are attributes."""


class KmipKeys:
    """The lifecycle operations of the KMIP door (see the module docstring)."""

    def __init__(self, keys: KeyService, lifecycle: LifecycleService, cache: MetadataCache, hsm: Hsm) -> None:
        self._keys = keys
        self._hsm = hsm
        self._lifecycle = lifecycle
        self._cache = cache

    async def key(self, call: KmipCall, uid: str) -> Key:
        """The key ``uid`` if the caller may see it (named by its policy, or an admin); ItemNotFound
        otherwise (a key it may not see is not told apart from one that does not exist)."""
        try:
            key = visible(await self._cache.snapshot(fresh=True).key(uid), call.principal)
        except (KeyNotFound, Forbidden):  # the same answer
            raise KeyNotFound(NO_OBJECT) from None
        call.key_id = key.id
        return key

    async def create(self, call: KmipCall, payload: CreateRequest) -> Created:
        """A new AES key, pre-active, owned by the caller."""
        if payload.object_type != spec.ObjectType.SYMMETRIC_KEY:
            raise invalid("Create makes symmetric keys; CreateKeyPair makes key pairs, Register the other objects")
        template = payload.template
        if template is not None and template.named:
            raise KmipRefusal(Reason.ITEM_NOT_FOUND, "templates are not supported", 404)
        kept, server = attrs.client_attributes(template.attributes if template is not None else [])
        algorithm = _key_type(server)
        if algorithm in KMIP_AES:
            algorithm = aes_type(spec_of(algorithm).key_bits or 0, server)
        exportable = bool(server.get(spec.AttributeType.EXTRACTABLE.value)) or _asks_exportable(kept)
        if exportable and not call.principal.key_store:
            authorize(call.principal, "kmip.CreateExportable")
        if call.principal.key_store and algorithm in KMIP_AES:
            exportable = True  # a key-store client's AES keys: exportable to it (issue 37, item 1)
        if exportable:
            call.details["exportable"] = True
        kept["owner"] = call.principal.id
        kept.setdefault("dates", {})
        kept["dates"][spec.AttributeType.INITIAL_DATE.value] = int(time.time())
        uses = OWNER_USES[spec_of(algorithm).default_usage or KeyUsage.ENCRYPT_DECRYPT]
        uses += (Operation.GET_KEY_MATERIAL,) if exportable else ()
        policy = Policy(grants={operation: frozenset({call.principal.name}) for operation in uses})
        created = await _in_thread(
            self._keys.create,
            NewKey(KMIP_NAME_PREFIX + new_id(), algorithm=algorithm, description="created through KMIP", policy=policy),
            record=call.success(),
            initial=InitialFacts(Lifecycle.PRE_ACTIVE, kept, exportable=exportable),
        )
        call.key_id, call.key_version = created.id, created.primary_version
        call.batch.id_placeholder = created.id
        return Created(spec.ObjectType.SYMMETRIC_KEY, created.id)

    async def register(self, call: KmipCall, payload: RegisterRequest) -> Identified:
        """A symmetric key a client gives, unwrapped into the HSM as a non-extractable key it owns
        (origin ``external``; exportable to a key-store client), pre-active; of a type of the table
        (AES-128, -192, -256), else refused by name."""
        if payload.managed_object is None:
            raise KmipRefusal(Reason.MISSING_DATA, "Register needs the object itself")
        template = payload.template
        kept, server = attrs.client_attributes(template.attributes if template is not None else [])
        key = payload.managed_object
        if not key.readable:
            raise invalid("the key to register cannot be read")
        bits = len(key.value) * 8
        algorithm = _key_type(
            {
                spec.AttributeType.CRYPTOGRAPHIC_ALGORITHM.value: key.cryptographic_algorithm,
                spec.AttributeType.CRYPTOGRAPHIC_LENGTH.value: bits,
            }
        )
        if algorithm not in KMIP_AES or key.cryptographic_length != bits:
            raise invalid("Register takes AES symmetric keys (16, 24 or 32 bytes of raw key material)")
        algorithm = aes_type(bits, server)
        kept["owner"] = call.principal.id
        kept.setdefault("dates", {})[spec.AttributeType.INITIAL_DATE.value] = int(time.time())
        uses = OWNER_USES[KeyUsage.ENCRYPT_DECRYPT]
        exportable = call.principal.key_store  # a key-store client Gets back what it registered (issue 37, item 1)
        if exportable:
            uses += (Operation.GET_KEY_MATERIAL,)
            call.details["exportable"] = True
        policy = Policy(grants={operation: frozenset({call.principal.name}) for operation in uses})
        created = await _in_thread(
            self._keys.create,
            NewKey(
                KMIP_NAME_PREFIX + new_id(),
                algorithm=algorithm,
                description="registered through KMIP",
                policy=policy,
                origin=Origin.EXTERNAL,
            ),
            record=call.success(),
            initial=InitialFacts(Lifecycle.PRE_ACTIVE, kept, exportable=exportable, material=key.value),
        )
        call.key_id, call.key_version = created.id, created.primary_version
        call.batch.id_placeholder = created.id
        return Identified(created.id)

    async def activate(self, call: KmipCall, payload: Named, uid: str | None = None) -> Identified:
        """Pre-Active to Active; Permission Denied in any other state."""
        key = await self.managed(call, uid or call.uid(payload.unique_identifier))
        if key.lifecycle_state is not Lifecycle.PRE_ACTIVE:
            raise wrong_state(f"the object is {_words(key.lifecycle_state)}, not pre-active: it cannot be activated")
        change = LifecycleChange(state=KeyState.ENABLED, lifecycle=Lifecycle.ACTIVE)
        await _in_thread(self._keys.change_lifecycle, key, change, record=call.success(key.id))
        return Identified(key.id)

    async def revoke(self, call: KmipCall, payload: RevokeRequest, uid: str | None = None) -> Identified:
        """Active or Pre-Active to Deactivated; to Compromised with the reason Key Compromise (from
        any state but Destroyed)."""
        key = await self.managed(call, uid or call.uid(payload.unique_identifier))
        compromised = revocation(call, payload)
        if key.state is KeyState.DESTROYED:
            raise wrong_state("the object is destroyed")
        if not compromised and key.lifecycle_state not in (Lifecycle.ACTIVE, Lifecycle.PRE_ACTIVE):
            raise wrong_state(f"the object is {_words(key.lifecycle_state)}: only an active object is deactivated")
        kept = dict(key.attributes)
        dates = dict(kept.get("dates", {}))
        now = int(time.time())
        dates[spec.AttributeType.DEACTIVATION_DATE.value] = dates.get(spec.AttributeType.DEACTIVATION_DATE.value, now)
        if compromised:
            occurred = payload.compromise_occurrence_date
            dates[spec.AttributeType.COMPROMISE_DATE.value] = now
            dates[spec.AttributeType.COMPROMISE_OCCURRENCE_DATE.value] = int(occurred) if occurred else now
        kept["dates"] = dates
        state = KeyState.DISABLED if key.state is KeyState.ENABLED else None
        lifecycle = Lifecycle.COMPROMISED if compromised else Lifecycle.DEACTIVATED
        change = LifecycleChange(state=state, lifecycle=lifecycle, attributes=kept)
        await _in_thread(self._keys.change_lifecycle, key, change, record=call.success(key.id))
        return Identified(key.id)

    async def destroy(self, call: KmipCall, payload: Named, uid: str | None = None) -> Identified:
        """Schedule the key's deletion after the shortest window of every door (``KM_MIN_PENDING_DAYS``):
        one lifecycle (issue 41, item 5); the key is Deactivated (or stays Compromised) until then.
        Permission Denied while it is Active, destroyed or pending deletion (its date stays)."""
        key = await self.managed(call, uid or call.uid(payload.unique_identifier))
        if key.lifecycle_state is Lifecycle.ACTIVE:
            raise wrong_state("the object is active: revoke it before destroying it")
        if key.state in (KeyState.DESTROYED, KeyState.PENDING_DELETION):
            raise wrong_state("the object is destroyed already (or its deletion is pending: its date stays)")
        days = self._lifecycle.min_pending_days
        await _in_thread(self._lifecycle.schedule_deletion, key, days, record=call.success(key.id))
        return Identified(key.id)

    async def managed(self, call: KmipCall, uid: str) -> Key:
        """The key ``uid`` if the caller may manage it (:func:`require_owner`): Permission Denied otherwise."""
        key = await self.key(call, uid)
        require_owner(call.principal, key.attributes.get("owner"))
        return key

    async def get(self, call: KmipCall, payload: GetRequest) -> Got:
        """The key's material, for an exportable key and a principal its policy names for
        ``get_key_material``; Permission Denied, saying why, for every other key."""
        key = await self.key(call, call.uid(payload.unique_identifier))
        if payload.key_format_type not in (None, spec.KeyFormatType.RAW):
            raise KmipRefusal(Reason.KEY_FORMAT_TYPE_NOT_SUPPORTED, "keys are handed out in the Raw format only")
        if payload.wrapping:
            raise not_supported("keys are handed out unwrapped, over the mutually authenticated TLS session")
        version = key.versions.get(key.primary_version)
        if not key.exportable or version is None or not (version.hsm.enc_label or "").endswith(EXPORTABLE_SUFFIX):
            raise denied(
                "the key was not created exportable: its material never leaves the HSM "
                "(use Encrypt/Decrypt, or ask an admin for an exportable key)"
            )
        if key.state in (KeyState.DESTROYED, KeyState.PENDING_DELETION):  # Destroy was asked: no more material
            raise KmipRefusal(Reason.ITEM_NOT_FOUND, "the object is destroyed (or its deletion is pending)", 404)
        if not key.policy.allows(Operation.GET_KEY_MATERIAL, call.principal.id):
            raise denied("the principal is not named for get_key_material in the key's policy")
        call.key_version = version.version
        call.details["exported"] = True
        async with self._keys.exporting(key, [version.version], call.entry(200)):
            material = await self._hsm.aexport(version.hsm)
        bits = spec_of(key.algorithm).key_bytes * 8
        return Got(spec.ObjectType.SYMMETRIC_KEY, key.id, material, spec.CryptographicAlgorithm.AES, bits)


def _asks_exportable(kept: dict[str, Any]) -> bool:
    """Whether the custom attribute ``x-exportable`` (``true``; for clients without 1.4's Extractable) asks for it."""
    asked = kept.get("custom", {}).get("x-exportable")
    return asked in (["boolean", True], ["text", "true"])


def revocation(call: KmipCall, payload: RevokeRequest) -> bool:
    """Whether a Revoke says the object is compromised (its reason is Key or CA Compromise); the
    reason goes into the audit record."""
    code = payload.revocation_code
    call.details["reason"] = getattr(code, "name", None)
    return code in (spec.RevocationReasonCode.KEY_COMPROMISE, spec.RevocationReasonCode.CA_COMPROMISE)


def kmip_type(key: Key) -> tuple[spec.CryptographicAlgorithm, int]:
    """The KMIP algorithm and length of ``key`` (any of ours: the AES of the others is 256 bits)."""
    return KMIP_NAMES.get(key.algorithm, (spec.CryptographicAlgorithm.AES, 256))


def _key_type(server: dict[str, Any]) -> Algorithm:
    """The key type of the algorithm and length a Create names; refused by name for any other."""
    algorithm = server.get(spec.AttributeType.CRYPTOGRAPHIC_ALGORITHM.value)
    length = server.get(spec.AttributeType.CRYPTOGRAPHIC_LENGTH.value)
    if algorithm is None or length is None:
        raise invalid("Create needs the Cryptographic Algorithm and Cryptographic Length attributes")
    name = spec.CryptographicAlgorithm(algorithm).name if algorithm in KNOWN_ALGORITHMS else str(algorithm)
    found = KEY_TYPES.get((spec.CryptographicAlgorithm(algorithm), length)) if algorithm in KNOWN_ALGORITHMS else None
    if found is None or spec_of(found).asymmetric:
        offered = ", ".join(
            f"AES-{bits}"
            if kmip is spec.CryptographicAlgorithm.AES
            else f"{kmip.name.replace('_', '-')} of {bits} bits"
            for (kmip, bits), kind in sorted(KEY_TYPES.items(), key=lambda item: (item[0][0].name, item[0][1]))
            if not spec_of(kind).asymmetric
        )
        shown = f"AES-{length}" if name == "AES" else f"{name} of {length} bits"
        raise invalid(f"{shown} keys are not offered by this server's key table (it offers {offered})")
    return found


KNOWN_ALGORITHMS = frozenset(member.value for member in spec.CryptographicAlgorithm)
"""The Cryptographic Algorithm numbers the door names (a client may send any other)."""


def _words(state: Lifecycle) -> str:
    return state.value.replace("_", "-")


async def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn`` off the event loop (the store and the HSM answer in their own time)."""
    return await asyncio.to_thread(fn, *args, **kwargs)
