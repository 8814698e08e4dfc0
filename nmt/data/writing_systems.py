"""Which writing system a language's text is in, to catch a corpus whose sides are the other way round than its
languages say: manythings.org's `cmn-eng.zip` holds English first, and `source_lang: cmn` then trained an
English → Chinese model named Chinese → English, scored with the wrong tokenizer, and said nothing.

Only languages written in one script other than the others' can tell: a pair of Latin-script languages (English and
French) is told by its commonest words instead (nmt/data/function_words.py), and two that share a script without a
word list (Japanese and Chinese both write Han) are not checked.
"""

from __future__ import annotations

import unicodedata
from typing import Iterable

from nmt.data.languages import base_language

# The scripts each language's text is written in, by the first word of its letters' Unicode names.
_SCRIPTS = {
    "zh": {"CJK"}, "ja": {"CJK", "HIRAGANA", "KATAKANA"}, "ko": {"HANGUL"},
    **dict.fromkeys(("ru", "uk", "bg", "mk", "be", "kk", "ky", "mn", "tg", "tt"), {"CYRILLIC"}),
    **dict.fromkeys(("ar", "fa", "ur", "ps", "ug"), {"ARABIC"}), **dict.fromkeys(("he", "yi"), {"HEBREW"}),
    "el": {"GREEK"}, **dict.fromkeys(("hi", "mr", "ne"), {"DEVANAGARI"}), "bn": {"BENGALI"}, "ta": {"TAMIL"},
    "te": {"TELUGU"}, "kn": {"KANNADA"}, "ml": {"MALAYALAM"}, "gu": {"GUJARATI"}, "pa": {"GURMUKHI"},
    "si": {"SINHALA"}, "th": {"THAI"}, "lo": {"LAO"}, "km": {"KHMER"}, "my": {"MYANMAR"}, "ka": {"GEORGIAN"},
    "hy": {"ARMENIAN"}, "am": {"ETHIOPIC"},
    **dict.fromkeys(("en", "fr", "de", "es", "it", "pt", "nl", "sv", "da", "no", "nb", "nn", "fi", "et", "lv", "lt",
                     "pl", "cs", "sk", "sl", "hr", "bs", "hu", "ro", "tr", "az", "uz", "tk", "id", "ms", "tl", "vi",
                     "ca", "eu", "gl", "ga", "cy", "is", "eo", "la", "sq", "af", "sw", "ha", "yo", "ig", "zu", "xh",
                     "so", "mg", "rw", "fy", "lb", "br", "oc", "mt", "fo", "ht", "jv", "su", "mi", "qu"), {"LATIN"}),
}
SAMPLE = 1000  # pairs from the start of a corpus that the check reads


def scripts_of(language: str) -> set[str] | None:
    """The scripts `language`'s text is written in, or None where nmt does not know (or it has two, as Serbian)."""
    return _SCRIPTS.get(base_language(language))


def share_in(texts: Iterable[str], scripts: set[str]) -> float:
    """The share of the letters of `texts` that are in one of `scripts` (0 when there are no letters)."""
    letters = inside = 0
    for text in texts:
        for char in text:
            if char.isalpha():
                letters += 1
                inside += unicodedata.name(char, "").split(" ", 1)[0] in scripts
    return inside / letters if letters else 0.0


def swapped_sides(pairs: list[tuple[str, str]], languages: tuple[str, str]) -> bool:
    """Whether `pairs` read as (target, source) rather than (source, target) of `languages`: most of each side's
    letters in the other language's script, where the two languages are written in scripts of their own."""
    expected = [scripts_of(language) for language in languages]
    if not pairs or None in expected or expected[0] & expected[1]:
        return False
    sides = [[pair[0] for pair in pairs], [pair[1] for pair in pairs]]
    return share_in(sides[0], expected[1]) > 0.5 and share_in(sides[1], expected[0]) > 0.5 and \
        share_in(sides[0], expected[0]) < 0.2 and share_in(sides[1], expected[1]) < 0.2
