"""Measure FF1 tokenization through SoftHSM beside SoftHSM's single-call AES rate, in one run.

    PYTHONPATH=. .venv/bin/python scripts/measure_tokenize.py [--seconds 3]

Makes a throwaway SoftHSM token in a temporary directory, an FF1 key version (encrypt only) in
it, and reports for a 16-digit card number (keep_last 4, luhn valid): PKCS#11 operations per
token, tokens/s one call at a time (one trip to the HSM thread each), tokens/s in batches of 100
(one trip per batch), and SoftHSM's rate for one AES operation of the size FF1's rounds send.
Bounded: each measurement runs for ``--seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkcs11 import Mechanism

from keymanager.config import SOFTHSM_MODULE
from keymanager.domain import tokens
from keymanager.domain.ff1 import FF1
from keymanager.domain.models import Algorithm
from keymanager.domain.tokens import Luhn, TokenFormat
from keymanager.hsm.softhsm import ensure_softhsm_token, write_softhsm_conf

CARD = "4111111111111111"
FORMAT = TokenFormat(keep_last=4, luhn=Luhn.VALID)


def rate(seconds: float, step: Callable[[], int]) -> float:
    """Items per second of ``step`` (which answers how many items it did) over about ``seconds``."""
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        done += step()
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="km-measure-ff1-"))
    os.environ["SOFTHSM2_CONF"] = str(home / "softhsm2.conf")
    write_softhsm_conf(home / "softhsm2.conf", home / "tokens")
    try:
        ensure_softhsm_token(SOFTHSM_MODULE, "measure", "measure-pin-1", "measure-so-1", home / "softhsm2.conf")
        run(args.seconds)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(seconds: float) -> None:
    from keymanager.hsm import Hsm
    from keymanager.hsm import tokenization as tk

    hsm = Hsm(SOFTHSM_MODULE, "measure", "measure-pin-1")
    objects = hsm.generate_version("measure", 1, Algorithm.FF1_AES_256)
    label = objects.enc_label
    assert label is not None

    def count_operations(token: Any) -> int:
        prf, calls = tk.hsm_prf(token, label), []

        def counting(data: bytes) -> bytes:
            calls.append(len(data))
            return prf(data)

        tokens.tokenize(FF1(counting, 10), FORMAT, CARD, b"")
        print(f"PRF input sizes (bytes): {sorted(set(calls))}")
        return len(calls)

    def single_aes(token: Any) -> float:
        key, block = token.key(label), bytes(32)  # the size of each round's CBC-MAC for this card
        one = bytes(16)

        def step() -> int:
            key.encrypt(block, mechanism=Mechanism.AES_CBC, mechanism_param=one)
            return 1

        return rate(seconds, step)

    operations = hsm.call(count_operations)
    aes = hsm.call(single_aes)
    sequential = rate(seconds, lambda: len(tk.tokenize(hsm, objects, FORMAT, CARD, b"")) // 16)
    batch = [(CARD, b"")] * 100
    batched = rate(seconds, lambda: len(asyncio.run(tk.atokenize_many(hsm, objects, FORMAT, batch))))
    token = tk.tokenize(hsm, objects, FORMAT, CARD, b"")
    assert tk.detokenize(hsm, objects, FORMAT, token, b"") == CARD
    print(f"PKCS#11 operations per token: {operations} (each C_EncryptInit + C_Encrypt x2 in python-pkcs11)")
    print(f"SoftHSM single AES-CBC operation (32 bytes): {aes:,.0f}/s -> ceiling {aes / operations:,.0f} tokens/s")
    print(f"tokenize, one call at a time: {sequential:,.0f} tokens/s ({sequential * operations / aes:.0%} of ceiling)")
    print(f"tokenize, batches of 100:     {batched:,.0f} tokens/s ({batched * operations / aes:.0%} of ceiling)")
    hsm.destroy_version(objects)
    hsm.close()


if __name__ == "__main__":
    main()
