"""A start-up check of the HSM, run in a child process: can the module be loaded, is the token
there, does the PIN log in? The answer names the problem in one line, never the PIN.

It runs in its own process (``python -m keymanager.hsm.probe MODULE LABEL``, PIN on stdin) so
the serving process initialises PKCS#11 once, in its workers, as before.
"""

from __future__ import annotations

import sys

import pkcs11
from pkcs11 import exceptions as p11


def probe(module: str, token_label: str, pin: str) -> str | None:
    """``None`` when a session logs in on the token labelled ``token_label``; else what is wrong."""
    try:
        library = pkcs11.lib(module)
    except (OSError, RuntimeError, p11.PKCS11Error) as exc:
        return f"the PKCS#11 module {module} cannot be loaded ({type(exc).__name__})"
    try:
        token = library.get_token(token_label=token_label)
    except (p11.NoSuchToken, p11.TokenNotPresent, p11.TokenNotRecognised):
        return f"no token labelled {token_label!r} in {module} (run 'keymanager init' for SoftHSM)"
    except p11.MultipleTokensReturned:
        return f"several tokens are labelled {token_label!r} in {module}"
    try:
        with token.open(user_pin=pin):
            return None
    except p11.PinIncorrect:
        return f"the PIN of token {token_label!r} is incorrect (KM_PKCS11_PIN / KM_PKCS11_PIN_FILE)"
    except p11.PinLocked:
        return f"the PIN of token {token_label!r} is locked"
    except p11.PKCS11Error as exc:
        return f"token {token_label!r} refused a session ({type(exc).__name__})"


def main() -> int:
    problem = probe(sys.argv[1], sys.argv[2], sys.stdin.read().strip())
    if problem is not None:
        print(problem)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
