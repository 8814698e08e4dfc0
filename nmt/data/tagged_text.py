"""The sentences of text files as IWSLT and WMT ship them, tags and all: test sets in XML or SGML (one `<seg id="N">`
a line, amid `<doc>`, `<url>` and `<title>` lines), and TED's `train.tags.de-en.de` (the transcripts, a talk's
`<url>`, `<keywords>` and `<talkid>` lines between them). Read as plain text, their markup trained, translated and
was scored as sentences: a test set's BLEU counted `<doc docid="535" genre="lectures">` against its own copy.

`tagged_sentences(lines, path, language)` passes plain text through as it is, and reads tagged text as fairseq's
prepare-iwslt14.sh and sacrebleu do: a test set's segments only (of WMT's XML since 2021, which holds a source and its
references together, `language`'s: the source's, or the first translator's references aligned to it by segment id);
a transcript's lines without the metadata lines, the `<title>` and `<description>` tags stripped from their text.
Told by the first line with text, never the name.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Iterable, Iterator
from xml.sax.saxutils import unescape

from nmt.data.languages import base_language
from nmt.data.tmx import ONE_FILE, starts_tmx
from nmt.errors import NMTError

_SEGMENTED = re.compile(r"\s*<(\?xml|mteval|srcset|refset|tstset)\b")  # how a test set's XML or SGML starts
_TRANSCRIPT = re.compile(r"\s*<(url|doc|keywords|speaker|talkid|title|description|reviewer|translator)\b")
_SEGMENT = re.compile(r"\s*<seg\b[^>]*>(.*)</seg>\s*")
_TEXT_TAG = re.compile(r"\s*<(title|description)>(.*)</\1>\s*")  # a talk's title and summary: text, as fairseq keeps
# A talk's metadata line, as fairseq's prepare-iwslt14.sh and prepare-iwslt17-multilingual.sh drop them (grep -v):
# only these, so that a sentence that merely looks like markup (`<i>Yes</i>`) stays and the two sides stay aligned.
_METADATA_LINE = re.compile(r"\s*</?(url|keywords|speaker|talkid|reviewer|translator|doc)\b.*>\s*")
_SOURCE_AND_REFERENCES = re.compile(r"\s*<(src|ref|hyp)\b[^>]*\blang=")  # WMT's XML since 2021: all in one file
_BLOCK = re.compile(r"\s*<(src|ref|hyp)\b([^>]*)>\s*")
_BLOCK_END = re.compile(r"\s*</(src|ref|hyp)>\s*")
_DOCUMENT_END = re.compile(r"\s*</doc>\s*")
_ATTRIBUTE = re.compile(r'\b(lang|translator|system)="([^"]*)"')
_SEGMENT_ID = re.compile(r'\s*<seg\b[^>]*\bid="([^"]*)"')
_ENTITIES = {"&quot;": '"', "&apos;": "'"}  # with &amp;, &lt; and &gt;: XML's own, the only ones read


def tagging(first_line: str) -> str | None:
    """Which tagged text a file is, told by its first line with text: "segments" (a test set's XML or SGML),
    "transcript" (TED's train.tags), or None (plain text)."""
    if _SEGMENTED.match(first_line):
        return "segments"
    return "transcript" if _TRANSCRIPT.match(first_line) else None


READ_AS = {"segments": "a test set's XML/SGML: its <seg> lines only",
           "transcript": "TED transcripts: their <url>, <keywords>, <talkid> and other metadata lines dropped"}


def tagged_sentences(lines: Iterable[tuple[int, str]], path: Path | str,
                     language: str = "") -> Iterator[tuple[int, str]]:
    """(line number, sentence) of a file's (line number, line): plain text as it is, tagged text's sentences only;
    `language` picks the side of a WMT XML that holds several (since 2021)."""
    lines = iter(lines)
    head = []  # the lines up to the first with text, which tells the kind
    for numbered in lines:
        head.append(numbered)
        if numbered[1].strip():
            break
    kind = tagging(head[-1][1]) if head else None
    if head and starts_tmx(head[-1][1]):
        _refuse_tmx(head[-1][0], path)
    lines = itertools.chain(head, lines)
    if kind is None:
        yield from lines
    elif kind == "segments":
        yield from _segments(lines, path, language)
    else:
        yield from _transcript(lines)


def _segment_text(number: int, line: str, path: Path | str) -> str:
    """A `<seg id="N">text</seg>` line's sentence, as sacrebleu reads it (its spaces trimmed and runs of them made
    one), XML's five entities (`&amp;`) read as the characters they stand for."""
    segment = _SEGMENT.fullmatch(line)
    if segment is None:
        raise NMTError(f"{path} line {number}: a <seg> that does not end on its line, as a test set's XML or SGML "
                       "holds one segment a line")
    return " ".join(unescape(segment.group(1), _ENTITIES).split())


def _segments(lines: Iterator[tuple[int, str]], path: Path | str, language: str) -> Iterator[tuple[int, str]]:
    """A test set's `<seg>` lines, each one sentence; every other line is markup. WMT's XML since 2021 holds the
    source and its references in one file, by language and translator: read for `language` (`_wmt_side`)."""
    for number, line in lines:
        if starts_tmx(line):  # after its XML declaration
            _refuse_tmx(number, path)
        if _SOURCE_AND_REFERENCES.match(line):
            yield from _wmt_side(itertools.chain([(number, line)], lines), path, language)
            return
        if "<seg" in line:
            yield number, _segment_text(number, line, path)


def _refuse_tmx(number: int, path: Path | str) -> None:
    """TMX read as one side of two files (or as lines) took its <seg> lines of both languages for a test set's."""
    raise NMTError(f"{path} line {number} starts TMX, which holds both sides of each pair: {ONE_FILE}")


def _wmt_side(lines: Iterator[tuple[int, str]], path: Path | str, language: str) -> Iterator[tuple[int, str]]:
    """One side of WMT's XML since 2021 (`<doc>`s of a `<src lang=...>` block and `<ref lang=... translator=...>`
    blocks of `<seg id=...>` lines; systems' `<hyp>` blocks too): the source's segments where `language` is the
    source's, else the first translator's references in `language`, aligned to the source's segments by id, a
    document at a time, as sacrebleu aligns them (a segment the first translator left out: an empty line, so that
    the sides stay aligned; one that no translator translated: left out of both sides, as sacrebleu leaves it out).
    Without `language` (a file read on its own) or in neither language, an error naming them."""
    found: dict[str, set[str]] = {"src": set(), "ref": set()}
    side = translator = None
    block: tuple[str, str, str] | None = None  # (kind, language, translator) of the block the lines are in
    in_block = 0  # segments met in it: the id of one without its own
    sources: list[tuple[int, str, str]] = []  # this document's source segments: (line number, id, text)
    references: dict[str, tuple[int, str]] = {}  # this document's chosen references by segment id
    translated: set[str] | None = None  # ids any translator's reference of this document holds; None: no <ref>
    for number, line in lines:
        opened = _BLOCK.fullmatch(line)
        if opened:
            attributes = dict(_ATTRIBUTE.findall(opened.group(2)))
            block, in_block = (opened.group(1), attributes.get("lang", ""), attributes.get("translator", "")), 0
            if block[0] in found:
                found[block[0]].add(block[1])
            if block[0] == "ref" and translated is None:
                translated = set()
            matches = bool(language) and base_language(block[1]) == base_language(language)
            if matches and block[0] == "src":
                side = "src"
            elif matches and block[0] == "ref" and side != "src":
                side, translator = "ref", translator or block[2]
        elif _BLOCK_END.fullmatch(line):
            block = None
        elif "<seg" in line and block is not None:
            segment_id, in_block = _SEGMENT_ID.match(line), in_block + 1
            key = segment_id.group(1) if segment_id else f"#{in_block}"
            if block[0] == "src":
                sources.append((number, key, _segment_text(number, line, path)))
            elif block[0] == "ref":
                text = _segment_text(number, line, path)
                if text.strip():
                    translated.add(key)
                if side == "ref" and block[2] == translator:
                    references[key] = (number, text)
        elif _DOCUMENT_END.fullmatch(line):
            for source_number, key, text in sources if side else []:
                if translated is not None and key not in translated:
                    continue  # no reference to score it against: sacrebleu leaves the segment out
                yield (source_number, text) if side == "src" else references.get(key, (source_number, ""))
            sources, references, translated = [], {}, None
    if side is None:
        held = " and ".join(f"{kind} {', '.join(sorted(languages))}" for kind, languages in found.items()
                            if languages)
        wanted = f"no {language} side" if language else "no language named to read"
        raise NMTError(f"{path}: WMT's XML of a source and its references together ({held}): {wanted}; nmt reads "
                       "the side in the run's source or target language (or write each as text: sacrebleu -t wmt22 "
                       "-l de-en --echo src > test.de, --echo ref > test.en)")


def _transcript(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """TED transcripts' lines: a talk's title and description keep their text (fairseq's prepare-iwslt14.sh strips the
    tags), its other metadata lines (`<url>`, `<keywords>`, `<talkid>`, `<speaker>`, `<doc ...>`) are dropped."""
    for number, line in lines:
        text_tag = _TEXT_TAG.fullmatch(line)
        if text_tag:
            yield number, text_tag.group(2)
        elif not _METADATA_LINE.fullmatch(line):
            yield number, line
