"""Reach a server's token from outside it (run as ``python -m tests.support.token_objects`` with the
server's environment): ``make KEY_ID`` generates a key version's objects the database never hears
of (what a crash between the HSM's create and the commit leaves) and prints their labels;
``list PREFIX`` prints the labels under PREFIX."""

from __future__ import annotations

import sys

from keymanager.config import Settings
from keymanager.domain.models import Algorithm
from keymanager.errors import HsmUnavailable
from keymanager.hsm import Hsm


def main(command: str, argument: str) -> None:
    settings = Settings()
    settings.export_softhsm_conf()
    hsm = Hsm(settings.pkcs11_module, settings.pkcs11_token_label, settings.pin())
    try:
        if command == "make":
            objects = hsm.generate_version(argument, 1, Algorithm.AES_256_CBC_HMAC_SHA256)
            print(objects.enc_label)
            print(objects.mac_label)
        else:
            print("\n".join(_listed(hsm, argument)))
    finally:
        hsm.close()


def _listed(hsm: Hsm, prefix: str, attempts: int = 5) -> list[str]:
    """The labels under ``prefix``; SoftHSM may fail a search while another process destroys objects."""
    for _ in range(attempts - 1):
        try:
            return hsm.find_labels_afresh(prefix)
        except HsmUnavailable:
            continue
    return hsm.find_labels_afresh(prefix)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
