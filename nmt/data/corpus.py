"""Read the tab-separated pair list and normalize text the same way at training and translation time."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import NMTError

# U+202F (narrow no-break space), U+00A0 (no-break space) and U+2009 (thin space) precede French ?!: in the corpus.
_SPACES = str.maketrans({"\u202f": " ", "\u00a0": " ", "\u2009": " ", "\t": " ", "\n": " ", "\r": " "})
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
_WHITESPACE = re.compile(r"\s+")
# d2l.ai-style input puts a space before punctuation ("i'm home ."); English never does.
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,!?;:%)\]}])")


@dataclass(frozen=True)
class Normalizer:
    """Normalization settings; saved in every run directory so translation matches training."""

    lowercase_source: bool = True

    def clean(self, text: str) -> str:
        """NFC, unusual spaces to plain ones, zero-width and control characters removed, whitespace collapsed."""
        text = unicodedata.normalize("NFC", text).translate(_SPACES)
        text = _ZERO_WIDTH.sub("", text)
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Cc")
        return _WHITESPACE.sub(" ", text).strip()

    def source(self, text: str) -> str:
        text = _SPACE_BEFORE_PUNCT.sub(r"\1", self.clean(text))
        return text.lower() if self.lowercase_source else text

    def target(self, text: str) -> str:
        return self.clean(text)


def read_pairs(path: Path) -> list[tuple[str, str]]:
    """Raw (English, French) pairs; a third attribution column (newer releases) is ignored."""
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
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
