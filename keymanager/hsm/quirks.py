"""How one PKCS#11 module departs from the standard, chosen by the module's path.

Only SoftHSM has known departures, and they are not applied to anything else:

* **A stale view of the token.** SoftHSM may not show an object another process (worker or
  replica) made once this process has written to the token itself, until the library is
  initialised again (``C_Finalize``, ``C_Initialize``, login, every cached key copy). So for
  SoftHSM a missing label is looked up once more after re-initialising the library, and a
  "fresh" listing re-initialises first. Other modules show every object at once: a missing
  label is missing, and a listing is always fresh.
* **Odd answers for an object destroyed elsewhere.** When another process destroys an object
  between our search and our ``C_DestroyObject``, SoftHSM answers ``GeneralError`` or
  ``FunctionFailed`` as well as the standard ``ObjectHandleInvalid``. Other modules get only the
  standard answer read that way; any other error is an error.
* **Garbage mechanism flags.** SoftHSM 2.6.1 leaves ``CK_MECHANISM_INFO.flags`` uninitialised for
  its AES mechanisms, so for SoftHSM the capabilities check mechanisms and key sizes only (see
  :mod:`keymanager.hsm.capabilities`).
* **No length on unwrapped keys.** SoftHSM leaves ``CKA_VALUE_LEN`` at 0 on an unwrapped key and
  refuses it in an unwrap template, so an import's length cannot be read from the object: for
  SoftHSM only, it is measured (see :func:`keymanager.hsm.key_import.unwrap_version`). Other
  modules set it, as the standard says, and an unwrapped key without it is refused.
"""

from __future__ import annotations

from typing import Protocol

from pkcs11 import exceptions as p11

from keymanager.config import is_softhsm_module


class Refreshable(Protocol):
    """What a strategy needs of the token state (see :class:`keymanager.hsm.token.Token`)."""

    def reinitialize(self) -> None: ...


class PlainModule:
    """A PKCS#11 module that behaves as the standard says."""

    name = "plain"
    destroyed_elsewhere: tuple[type[p11.PKCS11Error], ...] = (p11.ObjectHandleInvalid,)
    """Errors of ``C_DestroyObject`` that mean another session destroyed the object first."""
    trusts_mechanism_flags = True
    """Whether ``C_GetMechanismInfo``'s flags mean what they say."""
    reports_unwrapped_length = True
    """Whether an unwrapped secret key's ``CKA_VALUE_LEN`` is its length."""

    def refresh_view(self, token: Refreshable) -> bool:
        """Make objects other processes made or destroyed visible to this one; whether it did
        anything (when not, looking again cannot find more)."""
        return False


class SoftHsmModule(PlainModule):
    """SoftHSM2: a per-process view of the token, and non-standard answers for vanished objects."""

    name = "softhsm"
    destroyed_elsewhere = (p11.ObjectHandleInvalid, p11.FunctionFailed, p11.GeneralError)
    trusts_mechanism_flags = False
    reports_unwrapped_length = False

    def refresh_view(self, token: Refreshable) -> bool:
        token.reinitialize()
        return True


def quirks_for(module: str) -> PlainModule:
    """The strategy for the PKCS#11 module at path ``module``."""
    return SoftHsmModule() if is_softhsm_module(module) else PlainModule()
