"""The sentences of text files as IWSLT and WMT ship them, tags and all: test sets in XML or SGML (one `<seg id="N">`
a line, amid `<doc>`, `<url>` and `<title>` lines), and TED's `train.tags.de-en.de` (the transcripts, a talk's
`<url>`, `<keywords>` and `<talkid>` lines between them). Read as plain text, their markup trained, translated and
was scored as sentences: a test set's BLEU counted `<doc docid="535" genre="lectures">` against its own copy.

`tagged_sentences(lines, path)` passes plain text through as it is, and reads tagged text as fairseq's
prepare-iwslt14.sh and sacrebleu do: a test set's segments only; a transcript's lines without the metadata lines, the
`<title>` and `<description>` tags stripped from their text. Told by the first line with text, never the name.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Iterable, Iterator
from xml.sax.saxutils import unescape

from nmt.errors import NMTError

_SEGMENTED = re.compile(r"\s*<(\?xml|mteval|srcset|refset|tstset)\b")  # how a test set's XML or SGML starts
_TRANSCRIPT = re.compile(r"\s*<(url|doc|keywords|speaker|talkid|title|description|reviewer|translator)\b")
_SEGMENT = re.compile(r"\s*<seg\b[^>]*>(.*)</seg>\s*")
_TEXT_TAG = re.compile(r"\s*<(title|description)>(.*)</\1>\s*")  # a talk's title and summary: text, as fairseq keeps
# A talk's metadata line, as fairseq's prepare-iwslt14.sh and prepare-iwslt17-multilingual.sh drop them (grep -v):
# only these, so that a sentence that merely looks like markup (`<i>Yes</i>`) stays and the two sides stay aligned.
_METADATA_LINE = re.compile(r"\s*</?(url|keywords|speaker|talkid|reviewer|translator|doc)\b.*>\s*")
_SOURCE_AND_REFERENCES = re.compile(r"\s*<(src|ref|hyp)\b[^>]*\blang=")  # WMT's XML since 2021: all in one file
_ENTITIES = {"&quot;": '"', "&apos;": "'"}  # with &amp;, &lt; and &gt;: XML's own, the only ones read


def tagging(first_line: str) -> str | None:
    """Which tagged text a file is, told by its first line with text: "segments" (a test set's XML or SGML),
    "transcript" (TED's train.tags), or None (plain text)."""
    if _SEGMENTED.match(first_line):
        return "segments"
    return "transcript" if _TRANSCRIPT.match(first_line) else None


READ_AS = {"segments": "a test set's XML/SGML: its <seg> lines only",
           "transcript": "TED transcripts: their <url>, <keywords>, <talkid> and other metadata lines dropped"}


def tagged_sentences(lines: Iterable[tuple[int, str]], path: Path | str) -> Iterator[tuple[int, str]]:
    """(line number, sentence) of a file's (line number, line): plain text as it is, tagged text's sentences only."""
    lines = iter(lines)
    head = []  # the lines up to the first with text, which tells the kind
    for numbered in lines:
        head.append(numbered)
        if numbered[1].strip():
            break
    kind = tagging(head[-1][1]) if head else None
    lines = itertools.chain(head, lines)
    if kind is None:
        yield from lines
    elif kind == "segments":
        yield from _segments(lines, path)
    else:
        yield from _transcript(lines)


def _segments(lines: Iterator[tuple[int, str]], path: Path | str) -> Iterator[tuple[int, str]]:
    """A test set's `<seg id="N">text</seg>` lines, each one sentence, as sacrebleu reads them (its spaces trimmed
    and runs of them made one), XML's five entities (`&amp;`) read as the characters they stand for; every other
    line is markup. WMT's XML since 2021, which holds the source and its references in one file by language and
    translator, is refused with the way to write each as text: read as one side, it was both."""
    for number, line in lines:
        if _SOURCE_AND_REFERENCES.match(line):
            raise NMTError(f"{path} line {number}: WMT's XML of a source and its references together (since 2021): "
                           "write each as text, one sentence a line (sacrebleu -t wmt22 -l de-en --echo src > "
                           "test.de, --echo ref > test.en), and name those")
        if "<seg" not in line:
            continue
        segment = _SEGMENT.fullmatch(line)
        if segment is None:
            raise NMTError(f"{path} line {number}: a <seg> that does not end on its line, as a test set's XML or "
                           "SGML holds one segment a line")
        yield number, " ".join(unescape(segment.group(1), _ENTITIES).split())


def _transcript(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """TED transcripts' lines: a talk's title and description keep their text (fairseq's prepare-iwslt14.sh strips the
    tags), its other metadata lines (`<url>`, `<keywords>`, `<talkid>`, `<speaker>`, `<doc ...>`) are dropped."""
    for number, line in lines:
        text_tag = _TEXT_TAG.fullmatch(line)
        if text_tag:
            yield number, text_tag.group(2)
        elif not _METADATA_LINE.fullmatch(line):
            yield number, line
