"""Text normalization, the same at training and translation time (settings saved in every run directory)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# U+202F (narrow no-break space), U+00A0 (no-break space) and U+2009 (thin space) precede French ?!: in the corpus.
_SPACES = str.maketrans({"\u202f": " ", "\u00a0": " ", "\u2009": " ", "\t": " ", "\n": " ", "\r": " "})
_ZERO_WIDTH = re.compile("[\u200b\u2060\ufeff]")  # zero-width space, word joiner, BOM: invisible, no meaning
# The zero-width non-joiner and joiner are spelling: Persian writes می‌خواهم with a ZWNJ, Indic scripts choose
# conjunct forms with them, emoji sequences join by ZWJ. Removed, a Persian translation came out misspelt.
_JOINERS = re.compile("[\u200c\u200d]")
_WHITESPACE = re.compile(r"\s+")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # exactly Unicode's category Cc
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# d2l.ai-style input puts a space before punctuation ("i'm home ."); English never does.
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,!?;:%)\]}])")


def replace_lone_surrogates(text: str) -> str:
    """U+FFFD for each lone surrogate: what remains can be written as UTF-8 (JSON, files, SentencePiece)."""
    return _LONE_SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class Normalizer:
    """Normalization settings per side; saved in every run directory so translation matches training.

    The defaults are the first release's (English source lowercased with punctuation joined, French target kept), so
    a normalizer.json written then, {"lowercase_source": ...}, still loads to the same behaviour.
    """

    lowercase_source: bool = True
    lowercase_target: bool = False
    join_punctuation_source: bool = True
    join_punctuation_target: bool = False
    unicode_nfc: bool = True
    remove_control_chars: bool = True
    # False is what data prepared before joiners were kept went through (its records lack the field); new
    # preparation keeps them (sources.resolve_normalizer).
    keep_joiners: bool = False

    def clean(self, text: str) -> str:
        """NFC, unusual spaces to plain ones, invisible zero-width and control characters removed (the joiners
        too unless kept), whitespace collapsed.

        A lone surrogate (an undecodable command-line byte, a JSON "\\ud800") is not text that SentencePiece or
        UTF-8 can carry: it becomes U+FFFD, so such input is translated like any unknown character, never a crash.
        """
        text = replace_lone_surrogates(text)
        if self.unicode_nfc:
            text = unicodedata.normalize("NFC", text)
        text = text.translate(_SPACES)
        if self.remove_control_chars:
            text = _ZERO_WIDTH.sub("", text)
            if not self.keep_joiners:
                text = _JOINERS.sub("", text)
            text = _CONTROL.sub("", text)
        return _WHITESPACE.sub(" ", text).strip()

    def _side(self, text: str, lowercase: bool, join_punctuation: bool) -> str:
        text = self.clean(text)
        if join_punctuation:
            text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
        return text.lower() if lowercase else text

    def source(self, text: str) -> str:
        return self._side(text, self.lowercase_source, self.join_punctuation_source)

    def target(self, text: str) -> str:
        return self._side(text, self.lowercase_target, self.join_punctuation_target)
