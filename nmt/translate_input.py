"""What `nmt translate` reads: its arguments and stdin's lines as text, one output line per input line whatever
the bytes, and a warning for input that is not what it seems (compressed data, a whole TSV or a test set's XML, the
target language's text)."""

from __future__ import annotations

import os
import sys
from typing import Iterable, Iterator

from nmt.errors import NMTError, RepeatedWarning, warn


def stdin_lines() -> Iterable[str]:
    """stdin's lines as text, each with its line feed; only \n ends a line (a lone \r is text, as in `cut` or
    `wc -l`), unless none comes and CRs end the lines (classic Mac OS text: nmt/data/text_files.py). A line that is
    not UTF-8 is read with U+FFFD for its bad bytes rather than ending the stream (one output line per input line,
    always), and a warning names it: garbled input is not translated in silence."""
    from nmt.data.text_files import compression, line_feed_lines

    not_utf8 = RepeatedWarning(warn, "non-UTF-8 line")
    for number, raw in enumerate(line_feed_lines(sys.stdin.buffer), 1):
        if number == 1 and (compressed := compression(raw[:4])):
            # Its bytes were translated line by line as text, a warning per line.
            raise NMTError(f"stdin is {compressed[0]}-compressed data, not text: decompress it first "
                           f"({compressed[1]} FILE | nmt ...)")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as err:
            not_utf8(f"stdin line {number} is not UTF-8 (byte {err.start}): its bad bytes are read as U+FFFD")
            yield raw.decode("utf-8", errors="replace")
    not_utf8.summarize()


def warn_of_whole_files(lines: Iterable[str], tabs_expected: bool = False) -> Iterator[str]:
    """`lines` as they are, with one warning if the first that holds text has a TAB (unless `tabs_expected`, as
    --tab-constraints reads them): `cat test.tsv | nmt translate` translates each source<TAB>target line whole (the
    TAB read as a space), its target too; or starts as IWSLT's or WMT's tagged text (a test set's XML), whose markup
    lines would be translated as sentences."""
    from nmt.data.tagged_text import tagging

    checked = False
    for number, line in enumerate(lines, 1):
        if not checked and line.strip():
            checked = True
            if "\t" in line and not tabs_expected:
                warn(f"stdin line {number} holds a TAB, which is read as a space: a source<TAB>target file? "
                     "Translate its first column: cut -f1 FILE | nmt translate")
            elif tagging(line):
                warn(f"stdin line {number} starts IWSLT's or WMT's tagged text (a test set's XML?): every line is "
                     "translated as it is, markup too. nmt evaluate --src FILE --ref REF reads its sentences and "
                     "writes their translations")
        yield line


def warn_of_the_other_language(lines: Iterable[str], languages: tuple[str, str]) -> Iterator[str]:
    """`lines` as they are (a stream's, not held back), with one warning if the first of them read as the run's
    target language by their commonest words (nmt/data/function_words.py): the other side's text, or a run of the
    other direction, translated into noise with no word of why."""
    from nmt.data.function_words import WordTally
    from nmt.data.writing_systems import SAMPLE

    tally, undecided = WordTally(languages), True
    for number, line in enumerate(lines, 1):
        if undecided and number <= SAMPLE:
            tally.add(line)
            verdict = tally.reads_as()
            undecided = verdict is None
            if verdict == languages[1]:
                warn(f"the input reads as {languages[1]} (by its commonest words), but the run translates "
                     f"{languages[0]}→{languages[1]}: the other side's text, or a run of the other direction?")
        yield line


def argument_text(argument: str) -> str:
    """A command-line argument as text: bytes that were not UTF-8 (kept by Python as surrogate escapes) become
    U+FFFD, as on stdin."""
    return os.fsencode(argument).decode("utf-8", errors="replace")
