"""Exact-duplicate detection over tens of millions of pairs in bounded memory: 64-bit hashes in a numpy
open-addressing table (8 bytes a slot, load ≤ 1/2), inserted a chunk at a time with vectorized linear probing.

A Python set of the pairs themselves would hold every sentence (gigabytes at WMT scale); a set of ints ~70 bytes an
entry. Two different pairs share a 64-bit BLAKE2 hash with probability ~n²/2⁶⁵ (about 3·10⁻⁶ for 10M pairs).
"""

from __future__ import annotations

import hashlib

import numpy as np

_EMPTY = np.uint64(0)


def hash64(text: str) -> int:
    """A stable 64-bit hash (never 0: 0 marks an empty slot)."""
    value = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")
    return value or 1


class SeenHashes:
    """`first_seen(hashes)`: which of a chunk's hashes were never seen before (earlier in the chunk included)."""

    def __init__(self, capacity: int = 1 << 20):
        self.table = np.zeros(_power_of_two(2 * capacity), dtype=np.uint64)
        self.count = 0

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        hashes = np.asarray(hashes, dtype=np.uint64)
        new = np.zeros(len(hashes), dtype=bool)
        if not len(hashes):
            return new
        _, first = np.unique(hashes, return_index=True)  # duplicates inside the chunk: the first one counts
        candidates = np.sort(first)
        if 2 * (self.count + len(candidates)) > len(self.table):
            self._grow(self.count + len(candidates))
        inserted = self._insert(hashes[candidates])
        new[candidates[inserted]] = True
        return new

    def _insert(self, keys: np.ndarray) -> np.ndarray:
        """Insert distinct keys; True where a key was not in the table yet."""
        mask = np.uint64(len(self.table) - 1)
        position = keys & mask
        pending = np.arange(len(keys))
        inserted = np.zeros(len(keys), dtype=bool)
        while len(pending):
            slots = self.table[position[pending]]
            found = slots == keys[pending]
            empty = slots == _EMPTY
            # Several keys may aim at the same empty slot this round: the first takes it, the others probe on.
            aim = position[pending][empty]
            _, winners = np.unique(aim, return_index=True)
            take = np.zeros(len(pending), dtype=bool)
            take[np.flatnonzero(empty)[winners]] = True
            self.table[position[pending[take]]] = keys[pending[take]]
            inserted[pending[take]] = True
            self.count += int(take.sum())
            keep = ~(found | take)
            pending = pending[keep]
            position[pending] = (position[pending] + np.uint64(1)) & mask
        return inserted

    def _grow(self, needed: int) -> None:
        """A table of at least twice `needed` slots (load ≤ 1/2), the old keys inserted again."""
        old = self.table[self.table != _EMPTY]
        self.table = np.zeros(_power_of_two(2 * needed), dtype=np.uint64)
        self.count = 0
        self._insert(old)


def _power_of_two(n: int) -> int:
    return 1 << max(4, int(n - 1).bit_length())
