"""Where the parallel text comes from: the built-in Tatoeba corpus, a TSV or JSON-lines file of your own, or two
line-aligned files (how each file is opened, decompressed and decoded: nmt/data/text_files.py).

`corpus_spec(cfg, data_dir)` resolves a `DataConfig` into a `CorpusSpec` (files, languages, direction, normalizer);
`read_pairs(spec)` yields raw (source, target) pairs from it, with one-line errors that name the file and line.
Nothing here knows English or French except the built-in corpus's own settings (`BUILTIN`).
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from nmt.config import BUILTIN_CORPUS, DataConfig, tsv_columns
from nmt.data.download import corpus_path, file_url_path, sha256_file
from nmt.data.languages import base_language, header_language
from nmt.data.normalizer import Normalizer
from nmt.data.text_files import text_lines
from nmt.errors import NMTError, counted


@dataclass(frozen=True)
class BuiltinCorpus:
    """A corpus `nmt` knows by name: its languages (file column order) and each language's normalization."""

    languages: tuple[str, str]
    lowercase: tuple[str, ...]  # languages whose case is folded by default
    join_punctuation: tuple[str, ...]  # languages whose "word ." spacing is undone by default


BUILTIN = {BUILTIN_CORPUS: BuiltinCorpus(("en", "fr"), lowercase=("en",), join_punctuation=("en",))}


@dataclass(frozen=True)
class CorpusSpec:
    kind: str  # builtin | tsv | files
    files: tuple[Path, ...]  # the training text: one TSV, or source + target
    source_lang: str
    target_lang: str
    reverse: bool
    normalizer: Normalizer
    heldout: dict[str, tuple[Path, Path]]  # split → (source file, target file) of the user's own valid/test
    # A TSV's source and target columns, counted from 1 (data.source_column/target_column); None: those a header
    # names, else 1 and 2, and a first column of ids or an index is refused rather than trained on.
    columns: tuple[int, int] | None = None

    @property
    def direction(self) -> str:
        return f"{self.source_lang}→{self.target_lang}"

    @property
    def column_languages(self) -> tuple[str, str]:
        """The languages of the text's two columns in file order (data.source_lang, data.target_lang), which
        `reverse` swaps for training."""
        return (self.target_lang, self.source_lang) if self.reverse else (self.source_lang, self.target_lang)


def builtin_corpus(cfg: DataConfig) -> BuiltinCorpus | None:
    """The built-in corpus `cfg` trains on, or None for text of one's own (data.source_file wins over data.corpus)."""
    return BUILTIN.get(cfg.corpus) if not cfg.source_file else None


def resolve_normalizer(cfg: DataConfig) -> Normalizer:
    """Per-side normalization: explicit settings win; unset ones follow the built-in corpus's languages (through
    `reverse`), and are off for a corpus of your own."""
    builtin = builtin_corpus(cfg)
    source, target = _builtin_languages(builtin, cfg.reverse) if builtin else ("", "")

    def choose(explicit: bool | None, language: str, defaults: tuple[str, ...]) -> bool:
        return explicit if explicit is not None else bool(builtin) and language in defaults

    return Normalizer(
        lowercase_source=choose(cfg.lowercase_source, source, builtin.lowercase if builtin else ()),
        lowercase_target=choose(cfg.lowercase_target, target, builtin.lowercase if builtin else ()),
        join_punctuation_source=choose(cfg.join_punctuation_source, source,
                                       builtin.join_punctuation if builtin else ()),
        join_punctuation_target=choose(cfg.join_punctuation_target, target,
                                       builtin.join_punctuation if builtin else ()),
        unicode_nfc=cfg.unicode_nfc, remove_control_chars=cfg.remove_control_chars,
        keep_joiners=cfg.keep_joiners is not False)


def _builtin_languages(builtin: BuiltinCorpus, reverse: bool) -> tuple[str, str]:
    first, second = builtin.languages
    return (second, first) if reverse else (first, second)


def languages(cfg: DataConfig) -> tuple[str, str]:
    """(source, target) language codes of `cfg`: its own, else the built-in corpus's."""
    builtin = builtin_corpus(cfg)
    if builtin is not None:
        default_source, default_target = _builtin_languages(builtin, cfg.reverse)
        return cfg.source_lang or default_source, cfg.target_lang or default_target
    if not cfg.source_lang or not cfg.target_lang:
        raise NMTError("a corpus of your own needs its languages: set data.source_lang and data.target_lang "
                       "(e.g. de and en)")
    return (cfg.target_lang, cfg.source_lang) if cfg.reverse else (cfg.source_lang, cfg.target_lang)


def _is_url(text: str) -> bool:
    return urllib.parse.urlparse(text).scheme in ("http", "https")


def _fetched(text: str, what: str, data_dir: Path) -> Path:
    """The file `text` names: an http(s) URL downloaded once into DATA_DIR/.downloads (and revalidated after),
    else a local path or file:// URL, which must be a regular file."""
    if _is_url(text):
        from nmt.data.download import fetch_file  # only this branch downloads

        return fetch_file(text, Path(data_dir) / ".downloads")
    return _local(text, what)


def _local(text: str, what: str) -> Path:
    parsed = urllib.parse.urlparse(text)
    path = file_url_path(text) if parsed.scheme == "file" else Path(text).expanduser()
    if not path.exists():
        raise NMTError(f"{what} not found: {path}")
    if not path.is_file():  # a pipe cannot serve: preparing reads a file more than once (hash, split, train)
        kind = "a directory" if path.is_dir() else "a pipe or device"
        raise NMTError(f"{what} {path} is not a regular file ({kind}): nmt prepare reads it more than once; save it "
                       "to a file first")
    return path


def corpus_spec(cfg: DataConfig, data_dir: Path) -> CorpusSpec:
    """Resolve `cfg` into files, languages and normalization; errors for what cannot work, before any work."""
    source_lang, target_lang = languages(cfg)
    heldout = {}
    for split in ("valid", "test"):
        src, tgt = getattr(cfg, f"{split}_source_file"), getattr(cfg, f"{split}_target_file")
        if bool(src) != bool(tgt):
            raise NMTError(f"data.{split}_source_file and data.{split}_target_file go together: set both or neither")
        if src:
            pair = (_fetched(src, f"data.{split}_source_file", data_dir),
                    _fetched(tgt, f"data.{split}_target_file", data_dir))
            heldout[split] = pair[::-1] if cfg.reverse else pair
    normalizer = resolve_normalizer(cfg)
    common = dict(source_lang=source_lang, target_lang=target_lang, reverse=cfg.reverse, normalizer=normalizer,
                  heldout=heldout)
    if cfg.source_file or cfg.target_file:
        if not (cfg.source_file and cfg.target_file):
            raise NMTError("data.source_file and data.target_file go together: set both")
        return CorpusSpec("files", (_fetched(cfg.source_file, "data.source_file", data_dir),
                                    _fetched(cfg.target_file, "data.target_file", data_dir)), **common)
    if cfg.corpus in BUILTIN:
        return CorpusSpec("builtin", (corpus_path(data_dir),), **common)
    columns = None if cfg.source_column is None and cfg.target_column is None else tsv_columns(cfg)
    if _is_url(cfg.corpus):
        return CorpusSpec("tsv", (_fetched(cfg.corpus, "data.corpus", data_dir),), **common, columns=columns)
    name = cfg.corpus
    looks_like_file = re.search(r"\.(tsv|csv|txt|jsonl?)(\.(gz|bz2|xz))?$|\.(zip|tgz|tar)$|/", name) \
        or name.startswith("file:")
    if not looks_like_file and not Path(name).expanduser().exists():
        raise NMTError(f"unknown data.corpus {name!r}: use {', '.join(BUILTIN)}, or a path or URL to a .tsv, "
                       ".jsonl, .gz or .zip file (or data.source_file + data.target_file)")
    return CorpusSpec("tsv", (_local(name, "data.corpus"),), **common, columns=columns)


def corpus_fingerprint(spec: CorpusSpec, builtin_sha256: str | None) -> str:
    """What identifies the text: the built-in corpus's sha256 (as before), else a hash over every input file."""
    if spec.kind == "builtin" and not spec.heldout:
        return builtin_sha256
    digest = hashlib.sha256()
    for path in (*spec.files, *(p for pair in spec.heldout.values() for p in pair)):
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()


_QUOTED_FIELD = re.compile(r'"((?:[^"]|"")*)"')  # a CSV-quoted field: wrapped in quotes, each inner one doubled
QUOTING_SAMPLE = 1000  # fields holding a quote that decide whether a TSV is CSV-quoted


def _csv_quoted(path: Path) -> bool:
    """Whether a TSV's fields are CSV-quoted, as pandas' `to_csv(sep="\\t")` and Excel's tab-delimited export write
    them: a sentence holding a quote is wrapped in quotes with its own doubled (`"He said ""hi""."`), and read as it
    was it trained with the doubled quotes. Decided by the first fields that hold a quote: all such, and one at least
    with a doubled quote. Tatoeba's raw text has quotes in fields that are not so (`"Says who?" "Says me."`)."""
    seen, doubled = 0, False
    for _, line in text_lines(path):
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


def _is_csv(path: Path) -> bool:
    """A comma-separated file is told by its name (`pairs.csv`, `.csv.gz`): commas are common inside sentences, so
    its text cannot say."""
    return re.search(r"\.csv(\.(gz|bz2|xz|zip))?$", Path(path).name.lower()) is not None


def _csv_delimiter(first_line: str) -> str:
    """A CSV's delimiter: a comma, or a semicolon where the first line has none but a semicolon (Excel writes ";"
    where the comma is the decimal mark: French, German). A comma CSV's first line always holds a comma."""
    return ";" if "," not in first_line and ";" in first_line else ","


_SEPARATED = {"\t": "tab", ",": "comma", ";": "semicolon"}


def _rows(path: Path, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of a TSV, split at its tabs (no quoting: Tatoeba's raw text has quotes of its own), or of
    a CSV, read by the csv module (a quoted field may hold commas, quotes and line breaks); a blank line: no cells."""
    if delimiter == "\t":
        for number, line in text_lines(path):
            yield number, line.split("\t") if line.strip() else []
        return
    reader = csv.reader((line + "\n" for _, line in text_lines(path)), delimiter=delimiter, strict=True)
    try:
        for cells in reader:
            yield reader.line_num, cells if any(cell.strip() for cell in cells) else []
    except csv.Error as err:
        raise NMTError(f"{path} line {reader.line_num}: not {_SEPARATED[delimiter]}-separated text as CSV writes it "
                       f"({err})") from None


@dataclass(frozen=True)
class PairFormat:
    """How one file of pairs is read, told once from its name and its first line with text: JSON lines (`keys`, the
    source's and the target's), or delimited text (its `delimiter`; the `columns` read, counted from 1, and where they
    came from; whether that first line is a header; whether a TSV's fields are CSV-quoted)."""

    keys: tuple[str, str] | None = None
    delimiter: str = "\t"
    columns: tuple[int, int] = (1, 2)
    columns_from: str = "the first two"  # or "as set" (data.source_column/target_column), "named by its header"
    header: bool = False
    quoted: bool = False

    def describe(self, path: Path) -> str | None:
        """For prepare's log: what was told from the file is said, not only done. None: a plain TSV."""
        if self.keys:
            return f"reading {path} as JSON lines: keys {self.keys[0]} and {self.keys[1]}"
        if self.delimiter == "\t" and self.columns_from == "the first two" and not self.quoted:
            return None
        quoting = "; CSV-quoted fields unquoted" if self.quoted else ""
        return (f"reading {path} as {_SEPARATED[self.delimiter]}-separated text: columns {self.columns[0]} and "
                f"{self.columns[1]} ({self.columns_from}){quoting}")


def pair_format(path: Path, languages: tuple[str, str], columns: tuple[int, int] | None = None) -> PairFormat:
    """How a file of pairs of one's own is read. `languages`: the languages of its source and target text
    (data.source_lang and data.target_lang, which name the file's sides whatever data.reverse says), which name JSON
    keys and header cells; `columns`: data.source_column/target_column (None: the ones a header names, else 1 and
    2). Refused here, before any pair: XML, columns set against a header, a first column of ids or an index."""
    number, first = _first_text(path)
    record = _json_object(first)
    if record is not None:
        if columns:
            raise NMTError(f"{path} is JSON lines, read by the keys data.source_lang and data.target_lang name: "
                           "data.source_column and data.target_column pick a TSV's columns (unset them)")
        return PairFormat(keys=_language_keys(_texts_of(record, path, number), languages, path, number))
    delimiter = _csv_delimiter(first) if _is_csv(path) else "\t"
    number, cells = next(((n, c) for n, c in _rows(path, delimiter) if c), (number, []))
    if cells and cells[0].lstrip().startswith(("<?xml", "<tmx")):
        raise NMTError(f"{path} is XML (a TMX file?): nmt reads pairs as tab-separated text or JSON lines, or two "
                       "line-aligned files (OPUS offers its corpora so: the Moses zip, en-fr.txt.zip)")
    named = _header_columns(cells, languages) if cells else None
    if named and columns and named != columns:
        raise NMTError(f"{path} line {number} names columns {named[0]} and {named[1]} as the source and the target "
                       f"({languages[0]}, {languages[1]}), but data.source_column and data.target_column say "
                       f"{columns[0]} and {columns[1]}: unset them to read the columns the header names")
    if cells and not (columns or named):
        _refuse_id_column(cells, path, number)
    return PairFormat(delimiter=delimiter, columns=columns or named or (1, 2),
                      columns_from="as set" if columns else "named by its header" if named else "the first two",
                      header=named is not None, quoted=delimiter == "\t" and _csv_quoted(path))


def _table_pairs(path: Path, fmt: PairFormat, builtin: bool = False) -> Iterator[tuple[str, str]]:
    """The pairs of a TSV or CSV read as `fmt` says (the built-in corpus: its first two of at most three columns)."""
    source, target = fmt.columns
    header_left = fmt.header
    for number, cells in _rows(path, fmt.delimiter):
        if not cells:  # an empty pair, as a blank line of two aligned files is: counted where pairs are dropped
            yield "", ""
            continue
        if header_left:
            header_left = False
            continue
        if len(cells) < max(source, target) or (builtin and len(cells) > 3):
            wanted = "source and target columns" if (source, target) == (1, 2) else f"columns {source} and {target}"
            raise NMTError(f"{path} line {number}: expected {_SEPARATED[fmt.delimiter]}-separated {wanted}, got "
                           f"{counted(len(cells), 'column')}")
        pair = cells[source - 1], cells[target - 1]
        yield (_unquoted(pair[0]), _unquoted(pair[1])) if fmt.quoted else pair


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


def _refuse_id_column(cells: list[str], path: Path, number: int) -> None:
    """A first column of numbers beside two or more others is an index or ids, not a sentence: tatoeba.org's exports
    are id<TAB>sentence<TAB>id<TAB>sentence, and pandas' `to_csv` writes its index first. Read as columns 1 and 2, a
    model learnt to translate numbers into the source language, and said nothing."""
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


def aligned_pairs(source: Path, target: Path, languages: tuple[str, str] = ("", "")) -> Iterator[tuple[str, str]]:
    """Pairs from two line-aligned files; different line counts are an error naming both. `languages` pick each
    side's file out of a zip that holds both (OPUS's Moses zips: one zip for data.source_file and target_file)."""
    count = 0
    sides = ((source, languages[0]), (target, languages[1]))
    for source_line, target_line in itertools.zip_longest(*(text_lines(*side) for side in sides)):
        if source_line is None or target_line is None:
            longer = sides[0] if target_line is None else sides[1]
            total = sum(1 for _ in text_lines(*longer))  # counted again from the start: the error names both counts
            counts = (total, count) if target_line is None else (count, total)
            names = [f"{path}'s .{language} file" if source == target else str(path) for path, language in sides]
            raise NMTError(f"{names[0]} has {counted(counts[0], 'line')} but {names[1]} has "
                           f"{counted(counts[1], 'line')}: the two files must be line-aligned")
        count += 1
        yield source_line[1], target_line[1]


def _json_object(line: str) -> dict | None:
    try:
        record = json.loads(line) if line.lstrip().startswith("{") else None
    except ValueError:  # a TSV whose first source sentence starts with "{"
        return None
    return record if isinstance(record, dict) else None


def _first_text(path: Path, language: str = "") -> tuple[int, str]:
    """(line number, text) of the first line with text (0, "" for none)."""
    return next(((number, line) for number, line in text_lines(path, language) if line.strip()), (0, ""))


def _texts_of(record: dict | None, path: Path, number: int) -> dict:
    """A JSON line's texts by language: under "translation", as Hugging Face's datasets hold them, or at the top."""
    texts = record.get("translation", record) if record is not None else None
    if not isinstance(texts, dict):
        raise NMTError(f"{path} line {number}: not a JSON object of texts by language, as every line of a "
                       "JSON-lines corpus must be")
    return texts


def _json_lines_pairs(path: Path, keys: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """The pairs of a JSON-lines corpus: `{"translation": {"de": "...", "en": "..."}}` a line, as Hugging Face's
    translation datasets hold them (`dataset.to_json(...)`), or the languages at the top level; `keys`: those of the
    source and target text (`pair_format` finds them from the languages, as a language where none is exact)."""
    for number, line in text_lines(path):
        if not line.strip():
            yield "", ""
            continue
        texts = _texts_of(_json_object(line), path, number)
        values = [texts.get(key) for key in keys]
        for key, value in zip(keys, values):
            if not isinstance(value, str):
                raise NMTError(f"{path} line {number}: no {key} text (keys: {', '.join(map(str, texts))})")
        yield values[0], values[1]


def _language_keys(texts: dict, languages: tuple[str, str], path: Path, number: int) -> tuple[str, str]:
    keys = []
    for language in languages:
        same = [k for k in texts if str(k).lower() == language.lower()] or \
            [k for k in texts if base_language(str(k)) == base_language(language)]
        if len(same) != 1:
            raise NMTError(f"{path} line {number}: its keys ({', '.join(map(str, texts))}) name no {language} text "
                           "alone: data.source_lang and data.target_lang name the keys of a JSON-lines corpus")
        keys.append(same[0])
    return keys[0], keys[1]


def _swapped(pairs: Iterator[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    return ((target, source) for source, target in pairs)


def _pairs_of(path: Path, fmt: PairFormat) -> Iterator[tuple[str, str]]:
    return _json_lines_pairs(path, fmt.keys) if fmt.keys else _table_pairs(path, fmt)


def _one_file_format(path: Path, spec: CorpusSpec) -> PairFormat | None:
    """How one file named for both sides holds its pairs, as a corpus can (a TSV, CSV or JSON lines: JoeyNMT's
    train/dev/test.tsv), or None: an archive with a file per language. Read as two line-aligned files, each side was
    the whole line, and a model learnt to copy "de<TAB>en" lines."""
    _, first = _first_text(path, spec.column_languages[0])
    if _json_object(first) is None and not _is_csv(path) and "\t" not in first:
        return None
    return pair_format(path, spec.column_languages, spec.columns)


def heldout_pairs(files: tuple[Path, Path], spec: CorpusSpec) -> Iterator[tuple[str, str]]:
    """A valid/test set of one's own, in training order: two line-aligned files, one file of pairs named for both
    sides, or an archive with a file per language."""
    fmt = _one_file_format(files[0], spec) if files[0] == files[1] else None
    if fmt is None:
        return aligned_pairs(*files, (spec.source_lang, spec.target_lang))
    pairs = _pairs_of(files[0], fmt)
    return _swapped(pairs) if spec.reverse else pairs


def read_pairs(spec: CorpusSpec, log: Callable[[str], None] | None = None) -> Iterator[tuple[str, str]]:
    """Raw (source, target) pairs of the training text, in file order, `reverse` applied; `log` is told how a file of
    pairs of one's own is read, where anything was told from it (`PairFormat.describe`)."""
    path = spec.files[0]
    if spec.kind == "builtin":
        pairs = _table_pairs(path, PairFormat(), builtin=True)
    else:
        fmt = pair_format(path, spec.column_languages, spec.columns) if spec.kind == "tsv" else \
            _one_file_format(path, spec) if path == spec.files[1] else None
        if fmt is None:
            pairs = aligned_pairs(*spec.files, spec.column_languages)
        else:
            described = fmt.describe(path)
            if log and described:
                log(described)
            pairs = _pairs_of(path, fmt)
    return _swapped(pairs) if spec.reverse else pairs
