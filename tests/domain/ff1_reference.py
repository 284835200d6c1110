"""A test-only FF1 written straight from NIST SP 800-38G Rev. 1, Algorithms 6-8; never used by the service.

Deliberately built differently from :mod:`keymanager.domain.ff1`: it keeps A and B as numeral
lists through every round (NUM/STR per step, as the spec writes them), builds P and Q as
integers, and chains its own CBC-MAC from single-block AES (software AES from
``cryptography``, keyed with raw bytes: acceptable in a test, never in the service).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


class ReferenceFF1:
    def __init__(self, key: bytes, radix: int) -> None:
        self._ecb = Cipher(algorithms.AES(key), modes.ECB()).encryptor()  # noqa: S305 (FF1 needs the single-block cipher)
        self.radix = radix

    def _ciph(self, block: int) -> int:
        return int.from_bytes(self._ecb.update(block.to_bytes(16, "big")), "big")

    def _prf(self, x: int, nblocks: int) -> int:
        """Algorithm 6: CBC-MAC of the nblocks-block integer x (most significant block first)."""
        y = 0
        for j in range(nblocks - 1, -1, -1):
            y = self._ciph(y ^ ((x >> (128 * j)) & ((1 << 128) - 1)))
        return y

    def _num(self, xs: list[int]) -> int:
        return sum(x * self.radix ** (len(xs) - 1 - k) for k, x in enumerate(xs))

    def _str(self, x: int, m: int) -> list[int]:
        return [(x // self.radix ** (m - 1 - k)) % self.radix for k in range(m)]

    def _y(self, tweak: bytes, n: int, u: int, v: int, i: int, half: list[int]) -> int:
        radix, t = self.radix, len(tweak)
        bits = 0
        while 2**bits < radix**v:  # ceil(v * log2(radix)), exactly
            bits += 1
        b = -(-bits // 8)
        d = 4 * -(-b // 4) + 4
        p = (1 << 120) | (2 << 112) | (1 << 104) | (radix << 80) | (10 << 72) | ((u % 256) << 64) | (n << 32) | t
        pad = (-t - b - 1) % 16
        qlen = t + pad + 1 + b
        q = (int.from_bytes(tweak, "big") << (8 * (pad + 1 + b))) | (i << (8 * b)) | self._num(half)
        r = self._prf((p << (8 * qlen)) | q, (16 + qlen) // 16)
        blocks = [r] + [self._ciph(r ^ j) for j in range(1, -(-d // 16))]
        s = 0
        for blk in blocks:
            s = (s << 128) | blk
        return s >> (128 * len(blocks) - 8 * d)

    def encrypt(self, xs: list[int], tweak: bytes) -> list[int]:
        n = len(xs)
        u, v = n // 2, n - n // 2
        a, b = xs[:u], xs[u:]
        for i in range(10):
            m = u if i % 2 == 0 else v
            c = (self._num(a) + self._y(tweak, n, u, v, i, b)) % self.radix**m
            a, b = b, self._str(c, m)
        return a + b

    def decrypt(self, xs: list[int], tweak: bytes) -> list[int]:
        n = len(xs)
        u, v = n // 2, n - n // 2
        a, b = xs[:u], xs[u:]
        for i in range(9, -1, -1):
            m = u if i % 2 == 0 else v
            c = (self._num(b) - self._y(tweak, n, u, v, i, a)) % self.radix**m
            b, a = a, self._str(c, m)
        return a + b
