"""Normalize, filter and deduplicate (source, target) pairs (nmt/data/sources.py reads them)."""

from __future__ import annotations

from typing import Iterable

from nmt.data.normalizer import Normalizer


def normalize_pairs(pairs: Iterable[tuple[str, str]], normalizer: Normalizer,
                    max_words: int) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Normalize, drop empty, over-long and exact-duplicate pairs; return kept pairs (file order) and drop counts."""
    seen: set[tuple[str, str]] = set()
    kept, dropped = [], {"empty": 0, "too_long": 0, "duplicate": 0}
    for src, tgt in pairs:
        pair, reason = normalize_pair(src, tgt, normalizer, max_words)
        if reason:
            dropped[reason] += 1
        elif pair in seen:
            dropped["duplicate"] += 1
        else:
            seen.add(pair)
            kept.append(pair)
    return kept, dropped


def normalize_pair(source: str, target: str, normalizer: Normalizer,
                   max_words: int) -> tuple[tuple[str, str], str | None]:
    """The normalized pair, and why it is dropped ("empty", "too_long") or None when it is kept."""
    source, target = normalizer.source(source), normalizer.target(target)
    if not source or not target:
        return (source, target), "empty"
    if len(source.split()) > max_words or len(target.split()) > max_words:
        return (source, target), "too_long"
    return (source, target), None
