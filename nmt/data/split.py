"""Leakage-free train/valid/test split: every pair sharing a source sentence lands in the same split."""

from __future__ import annotations

import hashlib
from collections import defaultdict

SPLITS = ("train", "valid", "test")


def split_value(source: str, salt: str) -> float:
    """The sentence's stable place in [0, 1): below test_fraction it is held out for test, and so on."""
    digest = hashlib.blake2b(f"{salt}\x00{source}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def split_of(source: str, salt: str, valid_fraction: float, test_fraction: float) -> str:
    """A stable hash of the sentence picks its split, so a newer corpus release keeps old test sentences in test."""
    u = split_value(source, salt)
    if u < test_fraction:
        return "test"
    if u < test_fraction + valid_fraction:
        return "valid"
    return "train"


def group_references(pairs: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(source, [all its translations]) in first-seen order: the multi-reference form of valid/test."""
    refs: dict[str, list[str]] = defaultdict(list)
    for src, tgt in pairs:
        refs[src].append(tgt)
    return list(refs.items())


def capped_sources(sources: list[str], salt: str, cap: int) -> set[str]:
    """The `cap` distinct sources of a held-out split that stay held out: those lowest by `split_value`, the same
    ones however the corpus is read, and most of them again in a grown corpus (the cut moves, the order does not)."""
    return set(sorted(dict.fromkeys(sources), key=lambda source: (split_value(source, salt), source))[:cap])
