"""GetHealthStatus of the XKS proxy API: a deep check, cached for at most :data:`MAX_AGE_SECONDS`.

The check is what an Encrypt needs: AES-256-GCM encryption and decryption of random bytes in the
HSM under a dedicated test key (label ``km/xks-health/…/aes``, made on first use like every key
version, never a key of a key store: AWS's advice, so nobody sees unexplained uses of their keys),
and a database that takes audit records (``Readiness``). The answer's ``healthStatus``:

- ``ACTIVE``: both work;
- ``DEGRADED``: the cryptography works but the HSM fails its readiness probe (a write: new keys
  and rotations would fail, encryption and decryption do not);
- ``UNAVAILABLE``: the cryptography fails or the audit records cannot be written (no XKS request
  could be served: each one's record is written before it is answered).

``ekmFleetDetails`` names the token this process reaches (manufacturer, model, serial number).
The health check is not authorised per key and touches no key of a key store, so it writes no
audit record (a failed signature is summarised as any other).
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from keymanager import __version__
from keymanager.domain.key_specs import xks_algorithm
from keymanager.domain.models import HsmObjects
from keymanager.errors import KeyManagerError
from keymanager.hsm import Hsm
from keymanager.services.readiness import Readiness

MAX_AGE_SECONDS = 30.0
"""How long a result is answered again (the spec allows a minute)."""
TEST_KEY_NAME = "xks-health"
TEST_KEY_PREFIX = f"km/{TEST_KEY_NAME}/"
_AAD = b"km:xks-health"


class XksHealth:
    """The answer of GetHealthStatus (see the module docstring)."""

    def __init__(
        self,
        hsm: Hsm,
        readiness: Readiness,
        *,
        max_age: float = MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hsm = hsm
        self._readiness = readiness
        self._max_age = max_age
        self._clock = clock
        self._label_lock = threading.Lock()
        self._label: str | None = None
        self._checking = asyncio.Lock()
        self._answer: tuple[float, dict[str, Any]] | None = None

    async def status(self) -> dict[str, Any]:
        """The GetHealthStatus answer, from a check at most ``max_age`` seconds old (one check at a time)."""
        async with self._checking:
            if self._answer is None or self._clock() - self._answer[0] >= self._max_age:
                self._answer = (self._clock(), await self._check())
            return self._answer[1]

    async def _check(self) -> dict[str, Any]:
        status = await self._status()
        try:
            vendor, model, serial = await self._hsm.aidentity()
        except KeyManagerError:
            vendor, model, serial = "unknown", "unknown", "unknown"
        return {
            "xksProxyFleetSize": 1,
            "xksProxyVendor": "keymanager",
            "xksProxyModel": f"keymanager XKS proxy {__version__}",
            "ekmVendor": vendor or "unknown",
            "ekmFleetDetails": [{"id": serial or "unknown", "model": model or "unknown", "healthStatus": status}],
        }

    async def _status(self) -> str:
        # Readiness first: the round trip below, once it succeeds, clears a failure of the HSM it saw.
        ready = await asyncio.to_thread(self._readiness.check)
        try:
            objects = HsmObjects(enc_label=await asyncio.to_thread(self._test_key), mac_label=None)
            sample = secrets.token_bytes(32)
            body = await self._hsm.aencrypt(objects, xks_algorithm(), b"", sample, _AAD)
            if await self._hsm.adecrypt(objects, xks_algorithm(), b"", body, _AAD) != sample:
                return "UNAVAILABLE"
        except KeyManagerError:
            return "UNAVAILABLE"
        if not ready["database"]:
            return "UNAVAILABLE"
        return "ACTIVE" if ready["hsm"] else "DEGRADED"

    def _test_key(self) -> str:
        """The label of the test key: the token's first, or a new one (blocking: HSM calls)."""
        with self._label_lock:
            if self._label is None:
                labels = [label for label in self._hsm.find_labels(TEST_KEY_PREFIX) if label.endswith("/aes")]
                if labels:
                    self._label = labels[0]
                else:
                    made = self._hsm.generate_version(TEST_KEY_NAME, 1, xks_algorithm())
                    assert made.enc_label is not None
                    self._label = made.enc_label
            return self._label
