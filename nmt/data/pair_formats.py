"""How one file of pairs of one's own is read: a TSV (tab-separated; CSV-quoted fields unquoted), a CSV (comma or
semicolon), fast_align's `source ||| target` lines, JSON lines (Hugging Face's `{"translation": {...}}`), or TMX
(nmt/data/tmx.py); its columns or keys named by a header or the config, else the first two; TMX's segments by their
xml:lang. All told once, from its name and its first line
with text, by `pair_format`, which refuses what would train in silence on something else than the text (ids, scores,
URLs or a dict in the first columns, one JSON document); read by `file_pairs`. Where the file comes from and how two
aligned files are read: nmt/data/sources.py.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from nmt.data.bad_lines import RAISE, BadLines
from nmt.data.languages import base_language, header_language, matching_code
from nmt.data.text_files import text_lines, text_name
from nmt.data.tmx import first_units_languages, is_tmx, tmx_pairs
from nmt.errors import NMTError, counted


_QUOTED_FIELD = re.compile(r'"((?:[^"]|"")*)"')  # a CSV-quoted field: wrapped in quotes, each inner one doubled
QUOTING_SAMPLE = 1000  # fields holding a quote that decide whether a TSV is CSV-quoted


def _csv_quoted(path: Path) -> bool:
    """Whether a TSV's fields are CSV-quoted, as pandas' `to_csv(sep="\\t")` and Excel's tab-delimited export write
    them: a sentence holding a quote is wrapped in quotes with its own doubled (`"He said ""hi""."`), and read as it
    was it trained with the doubled quotes. Decided by the first fields that hold a quote: all such, and one at least
    with a doubled quote. Tatoeba's raw text has quotes in fields that are not so (`"Says who?" "Says me."`)."""
    seen, doubled = 0, False
    for _, line in text_lines(path, bad=BadLines(skip=True)):  # one not UTF-8 tells nothing: the reading names it
        for cell in line.split("\t") if '"' in line else ():
            if '"' in cell:
                if not _QUOTED_FIELD.fullmatch(cell):
                    return False
                seen, doubled = seen + 1, doubled or '""' in cell
        if seen >= QUOTING_SAMPLE:
            break
    return doubled


def _unquoted(cell: str) -> str:
    quoted = _QUOTED_FIELD.fullmatch(cell)
    return quoted.group(1).replace('""', '"') if quoted else cell


def is_csv(path: Path, language: str = "", partner: str = "") -> bool:
    """A comma-separated file is told by its name (`pairs.csv`, `.csv.gz`), or by its archive member's (Kaggle's
    `archive.zip` of an `en-fr.csv`: read as a TSV, it was "got 1 column"): commas are common inside sentences, so
    its text cannot say."""
    return re.search(r"\.csv(\.(gz|bz2|xz|zip))?$", text_name(path, language, partner).lower()) is not None


def _csv_delimiter(first_line: str) -> str:
    """A CSV's delimiter: a comma, or a semicolon where the first line has none but a semicolon (Excel writes ";"
    where the comma is the decimal mark: French, German). A comma CSV's first line always holds a comma."""
    return ";" if "," not in first_line and ";" in first_line else ","


FAST_ALIGN = " ||| "  # fast_align's and Moses' "source ||| target" lines
_SEPARATED = {"\t": "tab", ",": "comma", ";": "semicolon", FAST_ALIGN: "|||"}


def _split_at(first_line: str) -> str:
    """A file of pairs that is not a CSV: split at tabs, or at " ||| " where its first line has that and no tab."""
    return FAST_ALIGN if "\t" not in first_line and FAST_ALIGN in first_line else "\t"


def _rows(path: Path, delimiter: str, bad: BadLines = RAISE) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of a TSV, split at its tabs (no quoting: Tatoeba's raw text has quotes of its own), or at
    " ||| ", or of a CSV, read by the csv module (a quoted field may hold commas, quotes and line breaks); a blank
    line, or a `bad` one skipped: no cells."""
    if delimiter in ("\t", FAST_ALIGN):
        for number, line in text_lines(path, bad=bad):
            yield number, line.split(delimiter) if line.strip() else []
        return
    reader = csv.reader((line + "\n" for _, line in text_lines(path, bad=bad)), delimiter=delimiter, strict=True)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as err:  # the reader starts afresh at the next line
            bad.meet(f"{path} line {reader.line_num}: not {_SEPARATED[delimiter]}-separated text as CSV writes it "
                     f"({err})", path)
            cells = []
        yield reader.line_num, cells if any(cell.strip() for cell in cells) else []


@dataclass(frozen=True)
class PairFormat:
    """How one file of pairs is read, told once from its name and its first line with text: JSON lines (`keys`, the
    source's and the target's), TMX (`tmx_languages`: the source's and the target's, which pick each unit's
    segments), or delimited text (its `delimiter`; the `columns` read, counted from 1, and where they came from;
    whether that first line is a header; whether a TSV's fields are CSV-quoted)."""

    keys: tuple[str, str] | None = None
    tmx_languages: tuple[str, str] | None = None
    delimiter: str = "\t"
    columns: tuple[int, int] = (1, 2)
    columns_from: str = "the first two"  # or "as set" (data.source_column/target_column), "named by its header"
    header: bool = False
    quoted: bool = False

    def describe(self, path: Path) -> str | None:
        """For prepare's log: what was told from the file is said, not only done (an archive's file named). None: a
        plain TSV."""
        if not self.keys and not self.tmx_languages and self.delimiter == "\t" and \
                self.columns_from == "the first two" and not self.quoted:
            return None
        member = text_name(path)
        read = f"{path} ({member})" if member != Path(path).name else str(path)
        if self.tmx_languages:
            return f"reading {read} as TMX: each unit's {self.tmx_languages[0]} and {self.tmx_languages[1]} segments"
        if self.keys:
            return f"reading {read} as JSON lines: keys {self.keys[0]} and {self.keys[1]}"
        quoting = "; CSV-quoted fields unquoted" if self.quoted else ""
        return (f"reading {read} as {_SEPARATED[self.delimiter]}-separated text: columns {self.columns[0]} and "
                f"{self.columns[1]} ({self.columns_from}){quoting}")


def pair_format(path: Path, languages: tuple[str, str], columns: tuple[int, int] | None = None) -> PairFormat:
    """How a file of pairs of one's own is read. `languages`: the languages of its source and target text
    (data.source_lang and data.target_lang, which name the file's sides whatever data.reverse says), which name JSON
    keys and header cells; `columns`: data.source_column/target_column (None: the ones a header names, else 1 and
    2). TMX is read by language (nmt/data/tmx.py). Refused here, before any pair: other XML, one JSON document,
    columns set against a header, a first column of ids, an index, scores or URLs, a Hugging Face dataset's
    to_csv."""
    number, first = first_text(path)
    if is_tmx(path, first_line=first):
        return _tmx_format(path, languages, columns)
    if json_document(first):
        raise NMTError(f"{path} line {number} starts one JSON document (an array, or an object over several lines), "
                       f"not JSON lines: {JSON_LINES_WAY}")
    record = json_object(first)
    if record is None and first.lstrip().startswith("{"):  # a cut or broken first line of JSON lines, or a sentence
        number, record = _next_json_object(path, number) or (number, None)
    if record is not None:
        if columns:
            raise NMTError(f"{path} is JSON lines, read by the keys data.source_lang and data.target_lang name: "
                           "data.source_column and data.target_column pick a TSV's columns (unset them)")
        texts = _texts_of(record, path, number)
        keys = _language_keys(texts, languages, path, number)
        if any(isinstance(texts[key], (dict, list)) for key in keys):  # pandas' to_json: {"en": {"0": ...}, ...}
            raise NMTError(f"{path} line {number}: its {keys[0]} holds many texts, not one: one JSON document "
                           f"(pandas' to_json?), not JSON lines: {JSON_LINES_WAY}")
        return PairFormat(keys=keys)
    delimiter = _csv_delimiter(first) if is_csv(path) else _split_at(first)
    rows = _rows(path, delimiter, BadLines(skip=True))  # the first row of cells: a bad line is the reading's to name
    number, cells = next(((n, c) for n, c in rows if c), (number, []))
    if cells and cells[0].lstrip().startswith("<?xml"):
        raise NMTError(f"{path} is XML but not TMX: nmt reads pairs as TMX, tab-separated text or JSON lines, or two "
                       "line-aligned files (a test set's XML named as both data.source_file and data.target_file)")
    named = _header_columns(cells, languages) if cells else None
    if named and columns and named != columns:
        raise NMTError(f"{path} line {number} names columns {named[0]} and {named[1]} as the source and the target "
                       f"({languages[0]}, {languages[1]}), but data.source_column and data.target_column say "
                       f"{columns[0]} and {columns[1]}: unset them to read the columns the header names")
    if cells and not (columns or named):
        _refuse_dict_column(cells, path, number)
        _refuse_leading_column(cells, path, number)
    return PairFormat(delimiter=delimiter, columns=columns or named or (1, 2),
                      columns_from="as set" if columns else "named by its header" if named else "the first two",
                      header=named is not None, quoted=delimiter == "\t" and _csv_quoted(path))


def table_pairs(path: Path, fmt: PairFormat, builtin: bool = False, bad: BadLines = RAISE) -> Iterator[tuple[str, str]]:
    """The pairs of a TSV or CSV read as `fmt` says (the built-in corpus: its first two of at most three columns); a
    line without them is `bad`'s: an error, or an empty pair."""
    source, target = fmt.columns
    header_left = fmt.header
    for number, cells in _rows(path, fmt.delimiter, bad):
        if not cells:  # an empty pair, as a blank line of two aligned files is: counted where pairs are dropped
            yield "", ""
            continue
        if header_left:
            header_left = False
            continue
        if len(cells) < max(source, target) or (builtin and len(cells) > 3):
            wanted = "source and target columns" if (source, target) == (1, 2) else f"columns {source} and {target}"
            bad.meet(f"{path} line {number}: expected {_SEPARATED[fmt.delimiter]}-separated {wanted}, got "
                     f"{counted(len(cells), 'column')}", path)
            yield "", ""
            continue
        pair = cells[source - 1], cells[target - 1]
        yield (_unquoted(pair[0]), _unquoted(pair[1])) if fmt.quoted else pair


def _tmx_format(path: Path, languages: tuple[str, str], columns: tuple[int, int] | None) -> PairFormat:
    """A TMX file's format, once its first units are found to hold both languages: a language it lacks is named with
    those it holds, before any pair (else every unit was a bad one)."""
    if columns:
        raise NMTError(f"{path} is TMX, read by the languages data.source_lang and data.target_lang name: "
                       "data.source_column and data.target_column pick a TSV's columns (unset them)")
    units = first_units_languages(path)
    if not units:
        raise NMTError(f"{path} is TMX with no translation unit (<tu>) in it")
    for language in languages:
        if not any(matching_code(codes, language) for codes in units):
            held = ", ".join(dict.fromkeys(code for codes in units for code in codes))
            raise NMTError(f"{path} is TMX whose first units hold {held} segments (xml:lang), no {language} one "
                           "alone: data.source_lang and data.target_lang name its languages")
    return PairFormat(tmx_languages=languages)


GENERIC_HEADERS = (("source", "target"), ("src", "tgt"), ("src", "trg"))  # a dataframe's column names


def _header_columns(cells: list[str], languages: tuple[str, str]) -> tuple[int, int] | None:
    """The columns (counted from 1) that a first line names as the source's and the target's, or None: no header.
    Named by their languages in any order (JoeyNMT's TSVs: `de<TAB>en`; pandas' `to_csv` after its index:
    `<TAB>de<TAB>en`; `id<TAB>en<TAB>id<TAB>fr`), or as source and target. Before, a header naming the languages
    the other way round than the config trained the direction backwards in silence."""
    named = [header_language(c) for c in cells]
    wanted = [base_language(language) for language in languages]
    if wanted[0] != wanted[1] and all(named.count(language) == 1 for language in wanted):
        return named.index(wanted[0]) + 1, named.index(wanted[1]) + 1
    names = [c.strip().lower() for c in cells]
    for source_name, target_name in GENERIC_HEADERS:
        if names.count(source_name) == 1 and names.count(target_name) == 1:
            return names.index(source_name) + 1, names.index(target_name) + 1
    return None


def _refuse_dict_column(cells: list[str], path: Path, number: int) -> None:
    """A header cell `translation` is a Hugging Face dataset's `to_csv`: each pair is one cell, the dict
    `{'de': '...', 'en': '...'}` as Python prints it, beside an `id` column where the dataset has one (opus_books).
    Read as columns 1 and 2, a model learnt to translate ids into dicts, and said nothing."""
    if any(cell.strip().lower() == "translation" for cell in cells):
        raise NMTError(f"{path} line {number} names a column 'translation': a Hugging Face dataset's to_csv, which "
                       "writes each pair as one cell, a Python dict? Save it as JSON lines instead "
                       "(dataset.to_json(\"pairs.jsonl\")), which nmt reads by language")


_SCORE = re.compile(r"-?\d+\.\d+(e-?\d+)?")  # a mined pair's margin score, as WikiMatrix and CCMatrix write it


def _refuse_leading_column(cells: list[str], path: Path, number: int) -> None:
    """A first column of numbers beside two or more others is an index, ids or scores, not a sentence: tatoeba.org's
    exports are id<TAB>sentence<TAB>id<TAB>sentence, pandas' `to_csv` writes its index first, and WikiMatrix's and
    CCMatrix's mined pairs come as score<TAB>source<TAB>target (ParaCrawl's raw ones start with their pages' URLs).
    Read as columns 1 and 2, a model learnt to translate numbers into the source language, and said nothing."""
    if len(cells) >= 3 and re.match(r"https?://\S+$", cells[0].strip()):
        raise NMTError(f"{path} line {number} starts with a URL beside {counted(len(cells) - 1, 'column')}: a crawled "
                       "corpus's source pages (ParaCrawl's url<TAB>url<TAB>source<TAB>target...)? Set "
                       "data.source_column and data.target_column to the columns that hold the text (there: 3 and 4)")
    if len(cells) >= 3 and _SCORE.fullmatch(cells[0].strip()):
        raise NMTError(f"{path} line {number} starts with a score ({cells[0].strip()}) beside "
                       f"{counted(len(cells) - 1, 'column')}: mined pairs as WikiMatrix and CCMatrix write them "
                       "(score<TAB>source<TAB>target)? Set data.source_column: 2 and data.target_column: 3")
    if len(cells) < 3 or not cells[0].strip().isdigit():
        return
    if len(cells) >= 4 and cells[2].strip().isdigit():
        raise NMTError(f"{path} line {number} reads as tatoeba.org's id<TAB>sentence<TAB>id<TAB>sentence (ids "
                       f"{cells[0].strip()} and {cells[2].strip()}): set data.source_column: 2 and "
                       "data.target_column: 4, or name the columns that hold the text")
    raise NMTError(f"{path} line {number} starts with a number ({cells[0].strip()}) beside "
                   f"{counted(len(cells) - 1, 'column')}: an index or id column (pandas' to_csv writes its index "
                   "first)? Set data.source_column and data.target_column (e.g. 2 and 3) to the columns that hold the "
                   "text, or save the file without it (to_csv(..., index=False))")


def json_object(line: str) -> dict | None:
    try:
        record = json.loads(line) if line.lstrip().startswith("{") else None
    except ValueError:  # a TSV whose first source sentence starts with "{"
        return None
    return record if isinstance(record, dict) else None


JSON_LINES_LOOKED_AT = 10  # lines with text after a first that starts with "{" but is no JSON object


def _next_json_object(path: Path, after: int) -> tuple[int, dict] | None:
    """(line number, record) of the first JSON object among the lines with text just after line `after`: a JSON-lines
    corpus whose first line is cut or broken is told by the lines after it (a TSV's lines hold tabs after their
    first sentence, never a JSON object), so that its bad first line is data.bad_lines' to name or skip."""
    lines = text_lines(path, bad=BadLines(skip=True))
    texts = ((number, line) for number, line in lines if number > after and line.strip())
    for number, line in itertools.islice(texts, JSON_LINES_LOOKED_AT):
        record = json_object(line)
        if record is not None:
            return number, record
    return None


def first_text(path: Path, language: str = "", partner: str = "") -> tuple[int, str]:
    """(line number, text) of the first line with text (0, "" for none)."""
    lines = text_lines(path, language, partner, BadLines(skip=True))  # one not UTF-8 is the reading's to name
    return next(((number, line) for number, line in lines if line.strip()), (0, ""))


JSON_LINES_WAY = ("save one object a line (pandas: to_json(path, orient=\"records\", lines=True); a Hugging Face "
                  "dataset: to_json(path))")


def _listed(keys) -> str:
    """A record's keys for an error line: the first six (a document's row numbers run to millions)."""
    keys = list(map(str, keys))
    return ", ".join(keys[:6]) + (f", ... ({len(keys):,} keys)" if len(keys) > 6 else "")


def json_document(line: str) -> bool:
    """Whether a file's first line starts one JSON document (an array of records, or an object over several lines:
    pandas' to_json without lines=True, json.dump) rather than JSON lines. A TSV's first sentence may start with
    "[" ("[Music] Hello"), not with an array of objects or a lone bracket."""
    text = line.strip()
    return text in ("[", "{") or re.match(r"\[\s*\{", text) is not None


def _texts_of(record: dict | None, path: Path, number: int) -> dict:
    """A JSON line's texts by language: under "translation", as Hugging Face's datasets hold them, or at the top."""
    texts = record.get("translation", record) if record is not None else None
    if not isinstance(texts, dict):
        raise NMTError(f"{path} line {number}: not a JSON object of texts by language, as every line of a "
                       "JSON-lines corpus must be")
    return texts


def _json_lines_pairs(path: Path, keys: tuple[str, str], bad: BadLines = RAISE) -> Iterator[tuple[str, str]]:
    """The pairs of a JSON-lines corpus: `{"translation": {"de": "...", "en": "..."}}` a line, as Hugging Face's
    translation datasets hold them (`dataset.to_json(...)`), or the languages at the top level; `keys`: those of the
    source and target text (`pair_format` finds them from the languages, as a language where none is exact); a line
    without them is `bad`'s: an error, or an empty pair."""
    for number, line in text_lines(path, bad=bad):
        if not line.strip():
            yield "", ""
            continue
        try:
            texts = _texts_of(json_object(line), path, number)
            missing = [key for key in keys if not isinstance(texts.get(key), str)]
            if missing:
                raise NMTError(f"{path} line {number}: no {missing[0]} text (keys: {_listed(texts)})")
        except NMTError as err:
            bad.meet(str(err), path)
            yield "", ""
            continue
        yield texts[keys[0]], texts[keys[1]]


def _language_keys(texts: dict, languages: tuple[str, str], path: Path, number: int) -> tuple[str, str]:
    keys = []
    for language in languages:
        key = matching_code(texts, language)
        if key is None:
            if texts and all(str(key).isdigit() for key in texts):  # pandas' to_json: {"column": {"0": ..., ...}}
                raise NMTError(f"{path} line {number}: keys {_listed(texts)}: rows of one JSON document (pandas' "
                               f"to_json?), not JSON lines: {JSON_LINES_WAY}")
            raise NMTError(f"{path} line {number}: its keys ({_listed(texts)}) name no {language} text alone: "
                           "data.source_lang and data.target_lang name the keys of a JSON-lines corpus")
        keys.append(key)
    return keys[0], keys[1]


def file_pairs(path: Path, fmt: PairFormat, bad: BadLines = RAISE) -> Iterator[tuple[str, str]]:
    if fmt.tmx_languages:
        return tmx_pairs(path, fmt.tmx_languages, bad)
    return _json_lines_pairs(path, fmt.keys, bad) if fmt.keys else table_pairs(path, fmt, bad=bad)
