"""Leakage-free train/valid/test split: every pair sharing a source sentence lands in the same split."""

from __future__ import annotations

import hashlib
from collections import defaultdict

SPLITS = ("train", "valid", "test")


def split_of(source: str, salt: str, valid_fraction: float, test_fraction: float) -> str:
    """A stable hash of the sentence picks its split, so a newer corpus release keeps old test sentences in test."""
    digest = hashlib.blake2b(f"{salt}\x00{source}".encode("utf-8"), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2**64
    if u < test_fraction:
        return "test"
    if u < test_fraction + valid_fraction:
        return "valid"
    return "train"


def split_pairs(pairs: list[tuple[str, str]], salt: str, valid_fraction: float,
                test_fraction: float) -> dict[str, list[tuple[str, str]]]:
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in SPLITS}
    for src, tgt in pairs:
        splits[split_of(src, salt, valid_fraction, test_fraction)].append((src, tgt))
    return splits


def group_references(pairs: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """(source, [all its translations]) in first-seen order: the multi-reference form of valid/test."""
    refs: dict[str, list[str]] = defaultdict(list)
    for src, tgt in pairs:
        refs[src].append(tgt)
    return list(refs.items())
