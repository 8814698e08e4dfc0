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
        src, tgt = normalizer.source(src), normalizer.target(tgt)
        if not src or not tgt:
            dropped["empty"] += 1
        elif len(src.split()) > max_words or len(tgt.split()) > max_words:
            dropped["too_long"] += 1
        elif (src, tgt) in seen:
            dropped["duplicate"] += 1
        else:
            seen.add((src, tgt))
            kept.append((src, tgt))
    return kept, dropped
