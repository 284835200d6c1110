"""The services every protocol door translates its calls into (the KMIP and Transit doors' translations)."""

from __future__ import annotations

from dataclasses import dataclass

from keymanager.hsm import Hsm
from keymanager.services.asymmetric import AsymmetricService
from keymanager.services.crypto import CryptoService
from keymanager.services.keys import KeyService
from keymanager.services.lifecycle import LifecycleService


@dataclass(frozen=True, slots=True)
class CoreServices:
    """The keys (made, found, changed), their lifecycle (rotation, destruction), the uses of symmetric
    and asymmetric keys, and the HSM session they share; one of each per process (``services/container.py``)."""

    keys: KeyService
    lifecycle: LifecycleService
    crypto: CryptoService
    asymmetric: AsymmetricService
    hsm: Hsm
