"""Provisioning of the SoftHSM2 development token.

SoftHSM reads ``SOFTHSM2_CONF`` from the environment once, when the PKCS#11 library is first
initialised in a process (python-pkcs11 initialises it once per process and caches it). So
the variable must be set before the first call into the library, and every later PKCS#11
user in the same process (the service's HSM adapter) sees the token directory chosen then.

The token is initialised through PKCS#11 itself — ``C_InitToken`` and then ``C_InitPIN`` in
a security-officer session — so no PIN ever appears in a command line, the environment or a
log. python-pkcs11 exposes ``C_InitPIN`` (``Session.init_pin``) but not ``C_InitToken``,
which is therefore called through :mod:`ctypes` on the same, already initialised library.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pkcs11
from pkcs11.constants import TokenFlag
from pkcs11.exceptions import NoSuchToken, PKCS11Error
from pkcs11.types import Token

if TYPE_CHECKING:
    from pkcs11._pkcs11 import lib as Pkcs11Lib

SOFTHSM2_CONF_ENV = "SOFTHSM2_CONF"
_LABEL_BYTES = 32
_CKR_OK = 0x000
_CKR_NAMES = {
    0x0A0: "CKR_PIN_INCORRECT",
    0x0A2: "CKR_PIN_LEN_RANGE",
    0x0B6: "CKR_SESSION_EXISTS",
    0x0E0: "CKR_TOKEN_NOT_PRESENT",
    0x003: "CKR_SLOT_ID_INVALID",
    0x190: "CKR_CRYPTOKI_NOT_INITIALIZED",
}


def write_softhsm_conf(conf_path: Path, token_dir: Path) -> None:
    """Write a SoftHSM2 configuration file whose token directory is ``token_dir``.

    Creates ``token_dir`` and its parent (mode 0700) if they are missing and leaves existing
    ones as they are.
    The file holds ``directories.tokendir`` (absolute), ``objectstore.backend = file`` and
    ``log.level = ERROR``. Idempotent: a file that already has exactly this content is not
    rewritten; any other content is replaced atomically.
    """
    token_dir = token_dir.resolve()
    token_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token_dir.mkdir(mode=0o700, exist_ok=True)
    content = (
        "# Written by keymanager: SoftHSM2 configuration of the development token.\n"
        f"directories.tokendir = {token_dir}\n"
        "objectstore.backend = file\n"
        "log.level = ERROR\n"
    )
    if conf_path.is_file() and conf_path.read_text() == content:
        return
    conf_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = conf_path.with_name(f".{conf_path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(content)
    os.replace(tmp, conf_path)


def ensure_softhsm_token(module: str, label: str, pin: str, so_pin: str, conf_path: Path) -> bool:
    """Make sure the SoftHSM token ``label`` exists with the user PIN set; return True if it
    initialised anything (the token, or its user PIN left unset by an interrupted run).

    Sets ``SOFTHSM2_CONF`` to ``conf_path`` when it is not set yet (an existing value wins);
    this must happen before the library is first initialised in the process. An absent token
    is created in the first free slot with ``so_pin`` as security-officer PIN and ``pin`` as
    user PIN. The PINs are passed only to the PKCS#11 library: never to a subprocess, the
    environment, a log or an exception message.

    Raises :class:`RuntimeError` if the module is missing (SoftHSM2 not installed), no free
    slot is left, or the library refuses the initialisation (e.g. a PIN of the wrong length).
    """
    os.environ.setdefault(SOFTHSM2_CONF_ENV, str(conf_path.resolve()))
    label_bytes = _token_label_bytes(label)
    _require_module(module)
    lib = pkcs11.lib(module)
    try:
        token = lib.get_token(token_label=label)
    except NoSuchToken:
        _init_token(module, _free_slot_id(lib), so_pin, label_bytes)
        token = lib.get_token(token_label=label)
        _init_user_pin(token, so_pin, pin)
        return True
    if not token.flags & TokenFlag.USER_PIN_INITIALIZED:
        _init_user_pin(token, so_pin, pin)
        return True
    return False


def _require_module(module: str) -> None:
    if not Path(module).is_file():
        raise RuntimeError(
            f"PKCS#11 module {module} not found; for development install SoftHSM2 "
            "(apt-get install softhsm2) or set KM_PKCS11_MODULE"
        )


def _token_label_bytes(label: str) -> bytes:
    encoded = label.encode("utf-8")
    if not encoded or len(encoded) > _LABEL_BYTES:
        raise ValueError(f"token label must be 1 to {_LABEL_BYTES} bytes of UTF-8")
    return encoded.ljust(_LABEL_BYTES, b" ")


def _free_slot_id(lib: Pkcs11Lib) -> int:
    """The id of the first slot holding an uninitialised token (SoftHSM always keeps one)."""
    for slot in lib.get_slots(token_present=True):
        if not slot.get_token().flags & TokenFlag.TOKEN_INITIALIZED:
            return slot.slot_id
    raise RuntimeError("the PKCS#11 module has no free slot to initialise a token in")


def _init_token(module: str, slot_id: int, so_pin: str, label: bytes) -> None:
    """``C_InitToken`` on ``slot_id``; the library is already initialised by python-pkcs11.

    ``ctypes.CDLL`` of the same path returns the handle python-pkcs11 already loaded, so this
    call shares the library's state (no second ``C_Initialize``).
    """
    c_init_token = ctypes.CDLL(module).C_InitToken
    c_init_token.argtypes = [ctypes.c_ulong, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    c_init_token.restype = ctypes.c_ulong
    so_pin_bytes = so_pin.encode("utf-8")
    rv = c_init_token(slot_id, so_pin_bytes, len(so_pin_bytes), label)
    if rv != _CKR_OK:
        name = _CKR_NAMES.get(rv, f"CKR 0x{rv:08X}")
        raise RuntimeError(f"C_InitToken failed: {name}")


def _init_user_pin(token: Token, so_pin: str, pin: str) -> None:
    """``C_InitPIN`` in a read-write security-officer session."""
    try:
        with token.open(rw=True, so_pin=so_pin) as session:
            session.init_pin(pin)
    except PKCS11Error as exc:
        raise RuntimeError(f"initialising the user PIN failed: {type(exc).__name__}") from exc
