"""Language codes: what a config's `zh-Hant`, `pt_BR` or Tatoeba's `cmn` means to sacrebleu and to a TSV header.

sacrebleu keys its per-language choices (the Chinese, Japanese and Korean BLEU tokenizers) by ISO 639-1 codes, and
JoeyNMT's headers name columns `de`, `en`. Tatoeba and its manythings.org exports name languages by ISO 639-3 codes
(`cmn-eng.zip`, `jpn`), and ISO 639-2 has bibliographic twins (`fre`, `ger`): read as they are, a Mandarin target
coded `cmn` was scored with 13a, which sees a whole unspaced sentence as one word (BLEU 0.0 where tok:zh gave 42.7).
"""

from __future__ import annotations

# Three-letter codes (ISO 639-3 and 639-2/T, and 639-2/B where it differs) of the languages that have a two-letter
# one, for the languages Tatoeba and the common MT corpora hold. The Chinese languages (Mandarin, Cantonese, Wu,
# Min Nan, Hakka, Gan, Xiang, Jin, Min Dong, Literary) all write Han characters without spaces: all are zh to
# sacrebleu's tokenizer.
_TWO_LETTER = {
    **dict.fromkeys(("zho", "chi", "cmn", "yue", "wuu", "nan", "hak", "gan", "hsn", "cjy", "cdo", "lzh"), "zh"),
    "jpn": "ja", "kor": "ko",
    "eng": "en", "fra": "fr", "fre": "fr", "deu": "de", "ger": "de", "spa": "es", "ita": "it", "por": "pt",
    "rus": "ru", "nld": "nl", "dut": "nl", "ara": "ar", "arb": "ar", "tur": "tr", "pol": "pl", "ukr": "uk",
    "ces": "cs", "cze": "cs", "slk": "sk", "slo": "sk", "hun": "hu", "ron": "ro", "rum": "ro", "bul": "bg",
    "ell": "el", "gre": "el", "heb": "he", "hin": "hi", "ben": "bn", "urd": "ur", "fas": "fa", "per": "fa",
    "pes": "fa", "vie": "vi", "tha": "th", "ind": "id", "msa": "ms", "may": "ms", "zsm": "ms", "tgl": "tl",
    "swe": "sv", "nor": "no", "nob": "nb", "nno": "nn", "dan": "da", "fin": "fi", "est": "et", "lav": "lv",
    "lvs": "lv", "lit": "lt", "slv": "sl", "hrv": "hr", "srp": "sr", "bos": "bs", "mkd": "mk", "mac": "mk",
    "sqi": "sq", "alb": "sq", "cat": "ca", "eus": "eu", "baq": "eu", "glg": "gl", "gle": "ga", "cym": "cy",
    "wel": "cy", "isl": "is", "ice": "is", "epo": "eo", "lat": "la", "kat": "ka", "geo": "ka", "hye": "hy",
    "arm": "hy", "aze": "az", "kaz": "kk", "uzb": "uz", "tat": "tt", "bel": "be", "mon": "mn", "khm": "km",
    "lao": "lo", "mya": "my", "bur": "my", "tam": "ta", "tel": "te", "kan": "kn", "mal": "ml", "mar": "mr",
    "guj": "gu", "pan": "pa", "nep": "ne", "sin": "si", "swa": "sw", "swh": "sw", "amh": "am", "hau": "ha",
    "yor": "yo", "ibo": "ig", "zul": "zu", "xho": "xh", "afr": "af", "som": "so", "mlg": "mg", "kur": "ku",
    "kin": "rw", "fry": "fy", "ltz": "lb", "bre": "br", "oci": "oc", "ina": "ia", "ile": "ie", "ido": "io",
    "vol": "vo", "tuk": "tk", "kir": "ky", "tgk": "tg", "uig": "ug", "pus": "ps", "yid": "yi", "mlt": "mt",
    "fao": "fo", "hat": "ht", "jav": "jv", "sun": "su", "mri": "mi", "mao": "mi", "que": "qu", "grn": "gn",
}


UNSPACED = ("zh", "ja", "ko")  # written without spaces between words (sacrebleu tokenizes them with tools of their own)


def base_language(code: str) -> str:
    """The language of a code, as sacrebleu's per-language defaults key it: "zh-Hans" → "zh", "pt_BR" → "pt",
    "cmn" → "zh", "fre" → "fr"; a code with no two-letter twin stays as it is, lowercased ("ber", "tok")."""
    language = code.replace("_", "-").split("-")[0].lower()
    return _TWO_LETTER.get(language, language)


# English names of the same languages, for header lines that name their columns so (a spreadsheet's "English",
# "French"; Kaggle's "English words/sentences").
_NAMES = {
    "english": "en", "french": "fr", "german": "de", "spanish": "es", "italian": "it", "portuguese": "pt",
    "russian": "ru", "dutch": "nl", "arabic": "ar", "turkish": "tr", "polish": "pl", "ukrainian": "uk", "czech": "cs",
    "slovak": "sk", "hungarian": "hu", "romanian": "ro", "bulgarian": "bg", "greek": "el", "hebrew": "he",
    "hindi": "hi", "bengali": "bn", "urdu": "ur", "persian": "fa", "farsi": "fa", "vietnamese": "vi", "thai": "th",
    "indonesian": "id", "malay": "ms", "tagalog": "tl", "swedish": "sv", "norwegian": "no", "danish": "da",
    "finnish": "fi", "estonian": "et", "latvian": "lv", "lithuanian": "lt", "slovenian": "sl", "croatian": "hr",
    "serbian": "sr", "bosnian": "bs", "macedonian": "mk", "albanian": "sq", "catalan": "ca", "basque": "eu",
    "galician": "gl", "irish": "ga", "welsh": "cy", "icelandic": "is", "esperanto": "eo", "latin": "la",
    "georgian": "ka", "armenian": "hy", "azerbaijani": "az", "kazakh": "kk", "uzbek": "uz", "tatar": "tt",
    "belarusian": "be", "mongolian": "mn", "khmer": "km", "lao": "lo", "burmese": "my", "tamil": "ta", "telugu": "te",
    "kannada": "kn", "malayalam": "ml", "marathi": "mr", "gujarati": "gu", "punjabi": "pa", "nepali": "ne",
    "sinhala": "si", "swahili": "sw", "amharic": "am", "hausa": "ha", "yoruba": "yo", "igbo": "ig", "zulu": "zu",
    "xhosa": "xh", "afrikaans": "af", "somali": "so", "kurdish": "ku", "chinese": "zh", "mandarin": "zh",
    "cantonese": "zh", "japanese": "ja", "korean": "ko",
}


def header_language(cell: str) -> str:
    """The language a header cell names: a code ("de", "en-US", "deu"), or an English name, alone or first ("German",
    "English words/sentences"); else the cell as base_language reads it (no language). A sentence ("English is
    hard.") names none."""
    words = "".join(c if c.isalpha() else " " for c in cell.lower()).split()
    if words and words[0] in _NAMES and not any(mark in cell for mark in ".!?"):
        return _NAMES[words[0]]
    return base_language(cell.strip())


def matching_code(codes, language: str) -> str | None:
    """The one of `codes` (a JSON line's keys, a TMX unit's xml:lang values) that holds `language`'s text: the same
    code in any case or separator ("EN", "pt_BR" for pt-BR), else the only one of the same language ("fr-FR" for fr,
    "zh" for cmn); None where none is, or several are and none is exact ("en-US" and "en-GB" for en)."""
    def spelled(code) -> str:
        return str(code).lower().replace("_", "-")

    exact = [code for code in codes if spelled(code) == spelled(language)]
    same = exact or [code for code in codes if base_language(str(code)) == base_language(language)]
    return same[0] if len(same) == 1 else None
