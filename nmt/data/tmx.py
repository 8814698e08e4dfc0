"""TMX (Translation Memory eXchange), the XML in which OPUS (`en-fr.tmx.gz`, beside its Moses zips), the EU's DGT
memories and every CAT tool ship parallel text: `<tu>` units, each holding a `<tuv xml:lang="en"><seg>...</seg></tuv>`
per language. Before, it was refused as XML, or, named as two aligned files, its `<seg>` lines of both languages
were taken for a test set's.

`is_tmx(path)` tells one by its start (an XML declaration, comments and a DOCTYPE before `<tmx`), never its name;
`tmx_pairs(path, languages)` streams its units' pairs (expat, fed a few hundred lines at a time, so that a memory of
millions of units is never held whole), each side the segment whose xml:lang (TMX 1.1's `lang`) names that language
(nmt/data/languages.py's `matching_code`: `en-GB` for en). A segment's text is its words without the inline codes
that stand for the original document's markup (`<bpt>`, `<ept>`, `<ph>`, `<it>`, `<ut>`: an RTF's `{\\b` is no
word) and with its highlighted text (`<hi>`), its white space made single spaces, as sacrebleu reads a test set's.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Iterable, Iterator
from xml.parsers import expat

from nmt.data.bad_lines import RAISE, BadLines
from nmt.data.languages import matching_code
from nmt.data.text_files import text_lines
from nmt.errors import NMTError

# How a TMX file starts: its XML declaration, comments and a DOCTYPE, then the <tmx> element.
_TMX_START = re.compile(r"\s*(<\?xml[^>]*\?>\s*)?(<!--.*?-->\s*|<!DOCTYPE[^>\[]*(\[.*?\])?\s*>\s*)*<tmx\b", re.DOTALL)
START_LOOKED_AT = 4096  # characters of a file's start that tell TMX: its declaration and prologue fit many times
NATIVE_CODE = {"bpt", "ept", "it", "ph", "ut"}  # inline elements that hold the original document's codes, not text
LINES_FED = 256  # lines handed to expat at a time: one call a line cost more than the parsing
UNITS_LOOKED_AT = 10  # units whose languages tell which a file holds, for errors before any pair
ONE_FILE = ("name the file for both sides (data.corpus, both data.source_file and data.target_file, or both --src "
            "and --ref)")  # what to do with a TMX named as one side


def starts_tmx(text: str) -> bool:
    """Whether `text` (a file's start, or one of its lines) starts TMX: its declaration and prologue, then `<tmx`."""
    return _TMX_START.match(text) is not None


def holds_tmx(lines: Iterable[str]) -> bool:
    """Whether text of these `lines` is TMX, told by its start."""
    start, length = [], 0
    for line in lines:
        start.append(line)
        length += len(line)
        if length >= START_LOOKED_AT:
            break
    return starts_tmx("\n".join(start))


def is_tmx(path: Path, language: str = "", partner: str = "", first_line: str | None = None) -> bool:
    """Whether a file (an archive's: `language`'s, as text_lines picks it) is TMX, told by its start. `first_line`,
    its first line with text where the caller has read it: a file whose first line starts with no markup is told
    without opening it again (an aligned tarball's member is decompressed up to it at every open)."""
    if first_line is not None and not first_line.lstrip().startswith("<"):
        return False
    return holds_tmx(line for _, line in text_lines(path, language, partner, BadLines(skip=True)))


class _UnitReader:
    """expat's handlers for one TMX file: each `<tu>` read is kept as (its line, {xml:lang: segment text}) until the
    caller takes it."""

    def __init__(self, path: Path):
        self.path, self.units = path, []
        self.unit_line, self.texts, self.language, self.segment, self.code_depth = 0, {}, "", None, 0
        self.parser = expat.ParserCreate()
        self.parser.StartElementHandler, self.parser.EndElementHandler = self.start, self.end
        self.parser.CharacterDataHandler = self.characters
        # A TMX declares no entities: one that does may be an entity bomb, expanded a billion times (defusedxml's rule).
        self.parser.EntityDeclHandler = self.refuse_entity

    def refuse_entity(self, name, *_) -> None:
        raise NMTError(f"{self.path} line {self.parser.CurrentLineNumber}: declares an XML entity ({name}), as no "
                       "TMX does: refused unread, as an entity may expand without bound")

    def start(self, name: str, attributes: dict) -> None:
        if name == "tu":
            self.unit_line, self.texts = self.parser.CurrentLineNumber, {}
        elif name == "tuv":
            self.language = attributes.get("xml:lang") or attributes.get("lang") or ""
        elif name == "seg":
            self.segment, self.code_depth = [], 0
        elif name in NATIVE_CODE and self.segment is not None:
            self.code_depth += 1

    def characters(self, text: str) -> None:
        if self.segment is not None and not self.code_depth:
            self.segment.append(text)

    def end(self, name: str) -> None:
        if name == "seg" and self.segment is not None:
            self.texts[self.language] = " ".join("".join(self.segment).split())
            self.segment = None
        elif name in NATIVE_CODE and self.segment is not None:
            self.code_depth -= 1
        elif name == "tu":
            self.units.append((self.unit_line, self.texts))

    def feed(self, lines: list[str], last: bool = False) -> list[tuple[int, dict[str, str]]]:
        """The units that `lines` (the file's next, each fed with its line feed, so that expat's line numbers are the
        file's) complete."""
        try:
            self.parser.Parse("".join(line + "\n" for line in lines), last)
        except expat.ExpatError as err:
            raise NMTError(f"{self.path} line {err.lineno}, column {err.offset + 1}: {expat.errors.messages[err.code]}"
                           ": not well-formed XML, as a TMX file is (cut short, or edited by hand?)") from None
        units, self.units = self.units, []
        return units


def tmx_units(path: Path, bad: BadLines = RAISE,
              lines: Iterable[tuple[int, str]] | None = None) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, {xml:lang: text}) of each `<tu>` of a TMX file, in file order; `lines`: its (number, line), where read
    already (a pipe's). A line that is not UTF-8 is `bad`'s: skipped (as an empty line) or an error; XML that is not
    well-formed is an error, where reading cannot go on."""
    reader, lines = _UnitReader(path), iter(lines if lines is not None else text_lines(path, bad=bad))
    while batch := [line for _, line in itertools.islice(lines, LINES_FED)]:
        yield from reader.feed(batch)
    yield from reader.feed([], last=True)


def first_units_languages(path: Path) -> list[list[str]]:
    """The languages (xml:lang values) of each of a TMX file's first units: what it holds, for the error that says a
    configured language is in none of them."""
    units = tmx_units(path, BadLines(skip=True))
    return [list(texts) for _, texts in itertools.islice(units, UNITS_LOOKED_AT)]


def tmx_pairs(path: Path, languages: tuple[str, str], bad: BadLines = RAISE,
              lines: Iterable[tuple[int, str]] | None = None) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of a TMX file (of its `lines`, where read already): each unit's segments in
    `languages` (the source's and the target's); a unit without one of them is `bad`'s: an error, or an empty pair,
    dropped with the others."""
    chosen = {}  # a unit's languages → the source's and the target's code among them: a memory repeats a few
    for line, texts in tmx_units(path, bad, lines):
        held = tuple(texts)
        if held not in chosen:
            chosen[held] = [matching_code(held, language) for language in languages]
        codes = chosen[held]
        if None in codes:
            missing = languages[codes.index(None)]
            listed = ", ".join(texts) or "none"
            bad.meet(f"{path} line {line}: a <tu> with no {missing} segment alone (its languages: {listed})", path)
            yield "", ""
            continue
        yield texts[codes[0]], texts[codes[1]]
