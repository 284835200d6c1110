"""The state the HSM thread owns: the loaded library, one logged-in session, cached key copies.

One logged-in session per process (a second ``C_Login`` fails with ``UserAlreadyLoggedIn``).
Keys (secret and private) are looked up by label once and kept as session-object copies (still
sensitive and non-extractable), which encrypt about twice as fast as the token objects. When the session or
the token is lost, the caller maps the error to HsmUnavailable and the next call reopens
everything. Only the HSM thread touches a :class:`Token` (see :mod:`keymanager.hsm.dispatch`).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pkcs11
from pkcs11 import Attribute, ObjectClass
from pkcs11 import exceptions as p11

from keymanager.errors import HsmUnavailable
from keymanager.hsm.capabilities import Capabilities, probed_needs, read_capabilities
from keymanager.hsm.mechanism_probes import working_parameters
from keymanager.hsm.quirks import PlainModule
from keymanager.hsm.readback import check_object

log = logging.getLogger(__name__)

LOST = (
    p11.SessionHandleInvalid,
    p11.SessionClosed,
    p11.DeviceRemoved,
    p11.DeviceError,
    p11.TokenNotPresent,
    p11.TokenNotRecognised,
    p11.UserNotLoggedIn,
    p11.NoSuchToken,
    p11.PinIncorrect,
    p11.PinLocked,
    p11.KeyHandleInvalid,
    p11.ObjectHandleInvalid,
)
"""Errors after which the session (or the whole library) is not worth trusting again."""


_COPY = {Attribute.TOKEN: False, Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: False}
"""What a session copy of a key version must read back as (the token object's other attributes carry over)."""
EXPORTABLE_SUFFIX = "/xaes"
"""The label ending of an exportable key version's AES object (``hsm/export.py``): its copy is extractable."""
_EXPORTABLE_COPY = {Attribute.TOKEN: False, Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: True}


class MissingKeyObject(Exception):
    """A key version's object is not in the token (destroyed, or a token that is not ours)."""


class Token:
    """Library, logged-in session and cached key copies of one token, for the HSM thread only."""

    def __init__(self, module: str, token_label: str, pin: str, quirks: PlainModule) -> None:
        self._module = module
        self._token_label = token_label
        self._pin = pin
        self.quirks = quirks
        """How this module departs from the standard (see :mod:`keymanager.hsm.quirks`)."""
        self._lib: Any = None
        self._session: Any = None
        self._keys: dict[str, Any] = {}
        self._capabilities: Capabilities | None = None
        self.restart_pending = False
        """Set when a call failed or overran its deadline: the next call starts the library afresh first."""

    # -- session life --------------------------------------------------------------
    def session(self) -> Any:
        """The logged-in session, opened (and the library loaded) when there is none."""
        if self._session is None:
            self._open()
        return self._session

    def _open(self) -> None:
        try:
            if self._lib is None:
                self._lib = pkcs11.lib(self._module)
            token = self._find_token()
            try:
                self._session = token.open(rw=True, user_pin=self._pin)
            except p11.UserAlreadyLoggedIn:
                # A previous session of this process logged in and is gone; the login persists.
                self._session = token.open(rw=True)
            if self._capabilities is None:
                self._capabilities = read_capabilities(
                    token.slot,
                    trust_flags=self.quirks.trusts_mechanism_flags,
                    parameters=working_parameters(self._module, token, self._session, probed_needs()),
                )
        except p11.PKCS11Error as exc:
            self.reset()
            log.warning("HSM session could not be opened: %s", type(exc).__name__)
            raise HsmUnavailable() from None
        except (OSError, RuntimeError) as exc:
            self.reset()
            log.warning("PKCS#11 module could not be loaded: %s", type(exc).__name__)
            raise HsmUnavailable() from None

    @property
    def capabilities(self) -> Capabilities:
        """The token's mechanisms, read when the first session opens and kept for the process."""
        self.session()
        assert self._capabilities is not None
        return self._capabilities

    @property
    def known_capabilities(self) -> Capabilities | None:
        """The capabilities if they were read already (no call to the token), else None."""
        return self._capabilities

    def _find_token(self) -> Any:
        try:
            return self._lib.get_token(token_label=self._token_label)
        except (p11.NoSuchToken, p11.TokenNotPresent, p11.TokenNotRecognised):
            # Slots may have changed (token re-inserted, directory re-created): start over.
            self._lib.reinitialize()
            return self._lib.get_token(token_label=self._token_label)

    def present(self) -> None:
        """Raise a PKCS#11 error unless the library still finds the token (with an open session)."""
        self.session()
        self._lib.get_token(token_label=self._token_label)

    def reset(self) -> None:
        """Forget the session and cached keys; the next call reopens."""
        self._keys.clear()
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(p11.PKCS11Error):
                session.close()

    def reinitialize(self) -> None:
        """Forget the session and keys and initialise the loaded library again (C_Finalize, C_Initialize)."""
        self.reset()
        if self._lib is not None:
            self._lib.reinitialize()

    def restart(self) -> None:
        """Drop the session and finalise the library (C_Finalize); the next session initialises it again.

        Runs on the HSM thread before the call that follows a failed one, or one that overran its
        deadline (once it has returned), so that a network HSM's connection, a token directory put
        back, or a session the stuck call left in any state, is not reused as it was.
        """
        self.restart_pending = False
        self.reset()
        lib, self._lib = self._lib, None
        if lib is not None:
            with contextlib.suppress(p11.PKCS11Error):
                lib.finalize()
        log.info("HSM library finalised after a failed call; it is initialised again for this one")

    def close(self) -> None:
        """Close the session; the library stays loaded for the process."""
        self.reset()
        self._lib = None

    # -- keys -----------------------------------------------------------------------
    def key(self, label: str, object_class: ObjectClass = ObjectClass.SECRET_KEY) -> Any:
        """The session copy of the token key ``label`` of ``object_class`` (a secret or a private key;
        looked up once, then cached); MissingKeyObject when the token has no such key."""
        cached = self._keys.get(label)
        if cached is not None:
            return cached
        token_key = self._find(label, object_class)
        copy = token_key.copy({Attribute.TOKEN: False})
        check_object(copy, _EXPORTABLE_COPY if label.endswith(EXPORTABLE_SUFFIX) else _COPY)
        self._keys[label] = copy
        return copy

    def token_object(self, label: str, object_class: ObjectClass = ObjectClass.SECRET_KEY) -> Any:
        """The token object ``label`` of ``object_class`` itself (``CKA_TOKEN`` true: not the session
        copy :meth:`key` made, which has its label), looked for again after the module's view is
        refreshed as :meth:`_find` does; MissingKeyObject if absent."""
        template = {Attribute.CLASS: object_class, Attribute.LABEL: label, Attribute.TOKEN: True}
        found = list(self.session().get_objects(template))
        if not found and self.quirks.refresh_view(self):
            found = list(self.session().get_objects(template))
        if not found:
            raise MissingKeyObject()
        return found[0]

    def _find(self, label: str, object_class: ObjectClass = ObjectClass.SECRET_KEY) -> Any:
        """The token object ``label``, looked up again after the module's view is refreshed (SoftHSM:
        the library re-initialised, see :mod:`keymanager.hsm.quirks`); MissingKeyObject if absent."""
        try:
            return self.session().get_key(object_class=object_class, label=label)
        except p11.NoSuchKey:
            if not self.quirks.refresh_view(self):
                raise MissingKeyObject() from None
        try:
            return self.session().get_key(object_class=object_class, label=label)
        except p11.NoSuchKey:
            raise MissingKeyObject() from None

    def forget(self, label: str) -> None:
        """Destroy the cached session copy of ``label`` (if any); the token object is untouched."""
        copy = self._keys.pop(label, None)
        if copy is not None:
            with contextlib.suppress(p11.PKCS11Error):
                copy.destroy()
