"""Access keys of the AWS KMS API: creation, listing, revocation, and SigV4 authentication.

The secret of an access key is needed in clear to verify a signature, so it is stored sealed
(bound to its access key id) under a dedicated non-extractable HSM key, made on first use
through the same adapter call that makes key versions. The sealing scheme follows the token
(:func:`keymanager.hsm.capabilities.sealing_algorithm`): AES-256-GCM (key labelled
``km/access-keys/…/aes``) where the token has ``CKM_AES_GCM``, else AES-256-CBC-PAD with
HMAC-SHA256 in the HSM, encrypt-then-MAC (keys ``km/access-keys-cbc/…/aes`` and ``…/hmac``).
The label stored with each sealed secret names its scheme, so secrets sealed either way keep
opening. It is never logged and never stored in clear.

Verification cost. Opening the sealed secret is one HSM call (a thread hop and a GCM
decryption); each process therefore keeps the secrets it opened in a bounded cache (at most
:data:`SECRET_CACHE_SIZE`), keyed by the access key id *and* its sealed bytes. The access key
record itself is read through the request's :class:`Snapshot`, so a revoked key (or deleted
principal) stops authenticating on every replica as soon as the metadata version moves on,
exactly as bearer tokens do; a cached secret alone never authenticates anything.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from keymanager.db.kms import KmsStore
from keymanager.domain import access_keys as ak
from keymanager.domain import sigv4
from keymanager.domain.audit import AuditEntry
from keymanager.domain.kms import KmsError
from keymanager.domain.models import Algorithm, Door, HsmObjects, Principal
from keymanager.errors import DecryptionFailed, InvalidRequest, NotFound
from keymanager.hsm import Hsm
from keymanager.hsm.capabilities import sealing_algorithm
from keymanager.services.authorization import admits
from keymanager.services.snapshot import Snapshot

log = logging.getLogger(__name__)

SECRET_CACHE_SIZE = 1024
WRAP_KEY_NAMES = {Algorithm.AES_256_GCM: "access-keys", Algorithm.AES_256_CBC_HMAC_SHA256: "access-keys-cbc"}
"""The sealing key of each scheme: ``version_labels(WRAP_KEY_NAMES[scheme], 1, scheme, nonce)``."""
_UNKNOWN = "The security token included in the request is invalid."
_SIGNING = {Door.KMS: ("kms", sigv4.MAX_CLOCK_SKEW), Door.XKS: ("kms-xks-proxy", timedelta(minutes=5))}
"""Each SigV4 door's service name and clock skew."""


class AccessKeyService:
    """Access keys per principal, and the principal behind a SigV4-signed request."""

    def __init__(
        self, store: KmsStore, hsm: Hsm, principal: Callable[[str], Principal | None], hosts: frozenset[str]
    ) -> None:
        """``hosts``: the service's own names, which a signed request's ``Host`` must be (``public_hosts``)."""
        self._store = store
        self._hsm = hsm
        self._principal = principal
        self._hosts = hosts
        self._lock = threading.Lock()
        self._wrap_label: str | None = None
        self._secrets: dict[tuple[str, bytes], str] = {}

    # -- management (admin routes; blocking: call from a worker thread) -------------------
    def create(
        self, principal_name: str, given: tuple[str, str] | None = None, *, record: AuditEntry | None = None
    ) -> tuple[str, str, datetime]:
        """A new access key of ``principal_name`` (or the ``given`` id and secret): id, secret, creation time.

        A key store's (role ``xks``) follows AWS's rules for XKS credentials (``domain/access_keys.py``).
        InvalidRequest for a given pair out of form, NotFound for an unknown principal, Conflict
        for a taken id or too many keys.
        """
        owner = self._principal(principal_name)
        if owner is None:
            raise NotFound("principal not found")
        xks = admits(Door.XKS, owner.role)
        if given is None:
            key_id, secret = ak.new_access_key_id(), ak.new_secret_access_key(xks=xks)
        else:
            key_id, secret = given
            problem = ak.form_error(key_id, secret, xks=xks)
            if problem is not None:
                raise InvalidRequest(problem)
        label = self._wrap_key()
        scheme, objects = _sealing(label)
        sealed = self._hsm.encrypt(objects, scheme, ak.sealing_header(key_id), secret.encode(), b"")
        created = self._store.add_access_key(principal_name, key_id, sealed, label, record=record)
        return key_id, secret, created

    def list(self, principal_name: str) -> list[tuple[str, datetime]]:
        """Ids and creation times of the principal's access keys; NotFound for an unknown principal."""
        found = self._store.access_keys_of(principal_name)
        if found is None:
            raise NotFound("principal not found")
        return found

    def revoke(self, principal_name: str, access_key_id: str, *, record: AuditEntry | None = None) -> None:
        """Delete the access key: it stops authenticating at once, on every replica."""
        if not self._store.delete_access_key(principal_name, access_key_id, record=record):
            raise NotFound("access key not found")

    def _wrap_key(self) -> str:
        """The label (its ``/aes`` object) of the HSM key sealing new secrets, in the scheme the token
        supports best: the token's first such key, or a new one. InvalidRequest naming the missing
        mechanisms when the token supports no scheme."""
        with self._lock:
            if self._wrap_label is None:
                scheme = sealing_algorithm(self._hsm.capabilities())
                name = WRAP_KEY_NAMES[scheme]
                labels = [label for label in self._hsm.find_labels(f"km/{name}/") if label.endswith("/aes")]
                if labels:
                    self._wrap_label = labels[0]
                else:
                    made = self._hsm.generate_version(name, 1, scheme)
                    assert made.enc_label is not None
                    self._wrap_label = made.enc_label
            return self._wrap_label

    # -- authentication (the KMS door's hot path) ------------------------------------------
    async def authenticate(
        self, snapshot: Snapshot, request: sigv4.ReceivedRequest, now: datetime, *, door: Door = Door.KMS
    ) -> tuple[Principal, sigv4.Credential]:
        """The principal whose access key signed ``request`` for ``door`` (SigV4 service ``kms``, or
        ``kms-xks-proxy`` with AWS's five minutes of clock skew) and one of the service's own hosts
        (``public_hosts``), and the credential (region) it claims.

        Raises KmsError with AWS's code: ``MissingAuthenticationTokenException``,
        ``IncompleteSignatureException``, ``InvalidSignatureException``, ``UnrecognizedClientException``
        (also for a principal the door does not admit, :func:`~keymanager.services.authorization.admits`);
        ``InvalidSignatureException`` for a key store's request signed for another than its ``xks_region``.
        """
        service, skew = _SIGNING[door]
        try:
            credential = sigv4.parse(request, service=service, hosts=self._hosts, now=now, max_skew=skew)
        except sigv4.SignatureRefused as exc:
            raise KmsError(exc.code, exc.message) from None
        found = await snapshot.access_key(credential.access_key_id, self._store.access_key)
        if found is None or not admits(door, found.principal.role):
            raise KmsError("UnrecognizedClientException", _UNKNOWN)
        secret = await self._secret(found)
        try:
            sigv4.verify(request, credential, secret)
        except sigv4.SignatureRefused as exc:
            raise KmsError(exc.code, exc.message) from None
        region = found.principal.xks_region
        if region is not None and credential.region != region:
            raise KmsError("InvalidSignatureException", f"Credential should be scoped to a valid region: '{region}'")
        return found.principal, credential

    async def _secret(self, key: ak.AccessKey) -> str:
        cached = self._secrets.get((key.id, key.sealed_secret))
        if cached is not None:
            return cached
        scheme, objects = _sealing(key.wrap_label)
        try:
            opened = await self._hsm.adecrypt(objects, scheme, ak.sealing_header(key.id), key.sealed_secret, b"")
        except DecryptionFailed:
            log.error("the sealed secret of access key %s does not open (request refused)", key.id)
            raise KmsError("UnrecognizedClientException", _UNKNOWN) from None
        secret = opened.decode()
        if len(self._secrets) >= SECRET_CACHE_SIZE:
            self._secrets.pop(next(iter(self._secrets)))
        self._secrets[(key.id, key.sealed_secret)] = secret
        return secret


def _sealing(label: str) -> tuple[Algorithm, HsmObjects]:
    """The scheme and objects of the sealing key whose AES object is ``label`` (as stored with a secret)."""
    if label.startswith(f"km/{WRAP_KEY_NAMES[Algorithm.AES_256_CBC_HMAC_SHA256]}/"):
        return Algorithm.AES_256_CBC_HMAC_SHA256, HsmObjects(
            enc_label=label, mac_label=label.removesuffix("/aes") + "/hmac"
        )
    return Algorithm.AES_256_GCM, HsmObjects(enc_label=label, mac_label=None)
