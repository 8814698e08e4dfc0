"""Read the tab-separated pair list; normalize, filter and deduplicate the pairs."""

from __future__ import annotations

from pathlib import Path

from nmt.data.normalizer import Normalizer
from nmt.errors import NMTError


def read_pairs(path: Path) -> list[tuple[str, str]]:
    """Raw (English, French) pairs; a third attribution column (newer releases) is ignored."""
    pairs = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise NMTError(f"{path} line {number}: not UTF-8 text") from None
            if not line.strip():
                continue
            columns = line.split("\t")
            if len(columns) not in (2, 3):
                raise NMTError(f"{path} line {number}: expected 2 or 3 tab-separated columns, got {len(columns)}")
            pairs.append((columns[0], columns[1]))
    return pairs


def normalize_pairs(pairs: list[tuple[str, str]], normalizer: Normalizer,
                    max_words: int) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Normalize, drop empty, over-long and exact-duplicate pairs; return kept pairs (file order) and drop counts."""
    seen: set[tuple[str, str]] = set()
    kept, dropped = [], {"empty": 0, "too_long": 0, "duplicate": 0}
    for en, fr in pairs:
        en, fr = normalizer.source(en), normalizer.target(fr)
        if not en or not fr:
            dropped["empty"] += 1
        elif len(en.split()) > max_words or len(fr.split()) > max_words:
            dropped["too_long"] += 1
        elif (en, fr) in seen:
            dropped["duplicate"] += 1
        else:
            seen.add((en, fr))
            kept.append((en, fr))
    return kept, dropped
