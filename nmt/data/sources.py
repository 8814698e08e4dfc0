"""Where the parallel text comes from: the built-in Tatoeba corpus, a file of pairs of your own (how its columns or
keys are read: nmt/data/pair_formats.py), or two line-aligned files (how each file is opened, decompressed and
decoded: nmt/data/text_files.py).

`corpus_spec(cfg, data_dir)` resolves a `DataConfig` into a `CorpusSpec` (files, languages, direction, normalizer);
`read_pairs(spec)` yields raw (source, target) pairs from it, with one-line errors that name the file and line.
Nothing here knows English or French except the built-in corpus's own settings (`BUILTIN`).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from nmt.config import BUILTIN_CORPUS, DataConfig, tsv_columns
from nmt.data.bad_lines import RAISE, BadLines
from nmt.data.download import corpus_path, file_url_path, parse_url, sha256_file, user_path
from nmt.data.function_words import swapped_by_words
from nmt.data.languages import base_language
from nmt.data.normalizer import Normalizer
from nmt.data.pair_formats import (FAST_ALIGN, PairFormat, file_pairs, first_text, is_csv, json_document,
                                  json_object, pair_format, table_pairs)
from nmt.data.tagged_text import READ_AS, tagged_sentences, tagging
from nmt.data.text_files import text_lines, text_name
from nmt.data.tmx import is_tmx
from nmt.data.writing_systems import SAMPLE, swapped_sides
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
    return parse_url(text).scheme in ("http", "https")


def _fetched(text: str, what: str, data_dir: Path) -> Path:
    """The file `text` names: an http(s) URL downloaded once into DATA_DIR/.downloads (and revalidated after),
    else a local path or file:// URL, which must be a regular file."""
    if _is_url(text):
        from nmt.data.download import fetch_file  # only this branch downloads

        return fetch_file(text, Path(data_dir) / ".downloads")
    return _local(text, what)


def _local(text: str, what: str) -> Path:
    parsed = parse_url(text)
    path = file_url_path(text) if parsed.scheme == "file" else user_path(text, what)
    if not path.exists():
        where = "" if path.is_absolute() else \
            f" (a relative path is read from the current directory, {Path.cwd()}, not the config's)"
        raise NMTError(f"{what} not found: {path}{where}")
    if not path.is_file():  # a pipe cannot serve: preparing reads a file more than once (hash, split, train)
        kind = "a directory" if path.is_dir() else "a pipe or device"
        raise NMTError(f"{what} {path} is not a regular file ({kind}): nmt prepare reads it more than once; save it "
                       "to a file first")
    return path


_CORPUS_CHOICES = (f"use {', '.join(BUILTIN)}, or a path or URL to a .tsv, .jsonl, .tmx, .gz or .zip file "
                   "(or data.source_file + data.target_file)")


def corpus_spec(cfg: DataConfig, data_dir: Path) -> CorpusSpec:
    """Resolve `cfg` into files, languages and normalization; errors for what cannot work, before any work."""
    if not (cfg.corpus.strip() or cfg.source_file or cfg.target_file):
        # `--set data.corpus=` was "needs its languages", then "data.corpus . is not a regular file (a directory)".
        raise NMTError(f"data.corpus is empty: {_CORPUS_CHOICES}")
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
    looks_like_file = re.search(r"\.(tsv|csv|txt|jsonl?|tmx)(\.(gz|bz2|xz))?$|\.(zip|tgz|tar)$|/", name) \
        or name.startswith("file:")
    if not looks_like_file and not user_path(name, "data.corpus").exists():
        raise NMTError(f"unknown data.corpus {name!r}: {_CORPUS_CHOICES}")
    return CorpusSpec("tsv", (_local(name, "data.corpus"),), **common, columns=columns)


def corpus_fingerprint(spec: CorpusSpec, builtin_sha256: str | None) -> str:
    """What identifies the text: the built-in corpus's sha256 (as before), else a hash over every input file."""
    if spec.kind == "builtin" and not spec.heldout:
        return builtin_sha256
    digest = hashlib.sha256()
    for path in (*spec.files, *(p for pair in spec.heldout.values() for p in pair)):
        digest.update(sha256_file(path).encode())
    aligned = [*(_sides(spec.files, spec.column_languages) if spec.kind == "files" else ()),
               *(side for pair in spec.heldout.values() for side in _sides(pair, (spec.source_lang, spec.target_lang)))]
    if any(tagged_reading(*side) for side in aligned):
        # Data prepared before tagged text was read for its sentences holds its markup as pairs: prepared again.
        digest.update(b"tagged text read for its sentences")
    return digest.hexdigest()


def aligned_pairs(source: Path, target: Path, languages: tuple[str, str] = ("", ""),
                  bad: BadLines = RAISE) -> Iterator[tuple[str, str]]:
    """Pairs from two line-aligned files (or IWSLT's and WMT's tagged ones, their sentences aligned:
    nmt/data/tagged_text.py); different counts are an error naming both. `languages` pick each side's file out of
    a zip that holds both (OPUS's Moses zips: one zip for data.source_file and target_file). A line that is not
    UTF-8 is `bad`'s: an error, or an empty side, so that its pair is dropped and the files stay aligned."""
    count = 0
    sides = _sides((source, target), languages)
    if source == target and text_name(*sides[0]) == text_name(*sides[1]) and \
            tagged_reading(*sides[0]) != READ_AS["segments"]:  # a WMT XML holds a source and its references
        # One file of lines, not pairs: each side read the same lines, and a model learnt to copy them.
        read = text_name(*sides[0])
        held = f"its {read}'s" if read != Path(source).name else "its"
        raise NMTError(f"{source} is named as both the source and the target, but {held} lines are not pairs (no "
                       "tab or |||, not CSV or JSON lines): name a file per side, or a file of pairs")
    for source_line, target_line in itertools.zip_longest(*(_sentences(*side, bad) for side in sides)):
        if source_line is None or target_line is None:
            longer = sides[0] if target_line is None else sides[1]
            # Counted again from the start (bad lines too: they are lines): the error names both counts.
            total = sum(1 for _ in _sentences(*longer, BadLines(skip=True)))
            counts = (total, count) if target_line is None else (count, total)
            names = [f"{path}'s .{language} file" if source == target else str(path) for path, language, _ in sides]
            units = ["line" if tagged_reading(*side) is None else "sentence" for side in sides]
            raise NMTError(f"{names[0]} has {counted(counts[0], units[0])} but {names[1]} has "
                           f"{counted(counts[1], units[1])}: the two files must be line-aligned")
        count += 1
        yield source_line[1], target_line[1]


def _sides(files: tuple[Path, Path], languages: tuple[str, str]) -> tuple[tuple[Path, str, str], ...]:
    """(file, its language, the other side's) of each side: the languages pick an archive's file for each."""
    return (files[0], languages[0], languages[1]), (files[1], languages[1], languages[0])


def _sentences(path: Path, language: str, partner: str, bad: BadLines = RAISE) -> Iterator[tuple[int, str]]:
    return tagged_sentences(text_lines(path, language, partner, bad), path, language)


def tagged_reading(path: Path, language: str = "", partner: str = "") -> str | None:
    """How an aligned file's tags are read, for prepare's log (None: plain text)."""
    kind = tagging(first_text(path, language, partner)[1])
    return READ_AS[kind] if kind else None


def _swapped(pairs: Iterator[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    return ((target, source) for source, target in pairs)


def _one_file_format(path: Path, spec: CorpusSpec) -> PairFormat | None:
    """How one file named for both sides holds its pairs, as a corpus can (a TSV, CSV, JSON lines or TMX: JoeyNMT's
    train/dev/test.tsv, OPUS's en-fr.tmx), or None: an archive with a file per language. Read as two line-aligned
    files, each side was the whole line, and a model learnt to copy "de<TAB>en" lines."""
    languages = spec.column_languages
    _, first = first_text(path, *languages)
    pairs_told = json_object(first) is not None or json_document(first) or is_csv(path, *languages) or \
        "\t" in first or FAST_ALIGN in first or is_tmx(path, *languages, first_line=first)
    if not pairs_told:
        return None
    return pair_format(path, languages, spec.columns)


def heldout_pairs(files: tuple[Path, Path], spec: CorpusSpec) -> Iterator[tuple[str, str]]:
    """A valid/test set of one's own, in training order: two line-aligned files, one file of pairs named for both
    sides, or an archive with a file per language."""
    fmt = _one_file_format(files[0], spec) if files[0] == files[1] else None
    if fmt is None:
        pairs = aligned_pairs(*files, (spec.source_lang, spec.target_lang))
    else:
        pairs = file_pairs(files[0], fmt)
        pairs = _swapped(pairs) if spec.reverse else pairs
    named = (f"{files[0]} is named as the {spec.source_lang} side and {files[1]} as the {spec.target_lang}"
             if files[0] != files[1] else f"{files[0]}'s columns are named {', '.join(spec.column_languages)}")
    return _checked_first_pairs(pairs, spec, f"{named}: the other way round?", _listed_files(files))


def _aligned_reading(spec: CorpusSpec) -> list[str]:
    """For prepare's log, how two aligned files are read where anything was told from them: the files an archive's
    sides take (one of several pairs, or of a file per language), and tagged text read for its sentences."""
    sides = _sides(spec.files, spec.column_languages)
    said = [f"reading {path}'s {member} as the {language} side" for path, language, partner in sides
            if (member := text_name(path, language, partner)) != Path(path).name]
    read_as = tagged_reading(*sides[0])
    return said + ([f"reading {spec.files[0]} and {spec.files[1]} as {read_as}"] if read_as else [])


def read_pairs(spec: CorpusSpec, log: Callable[[str], None] | None = None,
               bad: BadLines = RAISE) -> Iterator[tuple[str, str]]:
    """Raw (source, target) pairs of the training text, in file order, `reverse` applied; `log` is told how a file of
    pairs of one's own is read, where anything was told from it (`PairFormat.describe`); a line of one's own text
    that holds no pair is `bad`'s: an error, or an empty pair (data.bad_lines). The built-in corpus is checked by
    its sha256, its every line a pair."""
    path = spec.files[0]
    if spec.kind == "builtin":
        pairs = table_pairs(path, PairFormat(), builtin=True)
    else:
        fmt = pair_format(path, spec.column_languages, spec.columns) if spec.kind == "tsv" else \
            _one_file_format(path, spec) if path == spec.files[1] else None
        if fmt is None:
            if log:
                for said in _aligned_reading(spec):
                    log(said)
            pairs = aligned_pairs(*spec.files, spec.column_languages, bad)
        else:
            described = fmt.describe(path)
            if log and described:
                log(described)
            pairs = file_pairs(path, fmt, bad)
    pairs = _swapped(pairs) if spec.reverse else pairs
    file_order = spec.column_languages
    return _checked_first_pairs(pairs, spec, f"data.source_lang and data.target_lang name the file's sides "
                                            f"{file_order[0]} and {file_order[1]}: the file holds them the other "
                                            f"way round? Set data.source_lang: {file_order[1]} and "
                                            f"data.target_lang: {file_order[0]} (data.reverse: true trains the "
                                            "other direction)", _listed_files(spec.files))


MIN_PAIRS_TO_TELL = 20  # pairs with text, before copies on both sides tell of one file named twice


def _listed_files(files: tuple[Path, ...]) -> str:
    return " and ".join(map(str, dict.fromkeys(files)))


def _checked_first_pairs(pairs: Iterator[tuple[str, str]], spec: CorpusSpec, fix: str,
                        files: str) -> Iterator[tuple[str, str]]:
    """`pairs` (in training order) as they are, once their first ones are found to be in the languages the spec
    names, as far as their writing systems can tell (nmt/data/writing_systems.py), and not mostly the same text on
    both sides; else a one-line error that names what they read as, with `fix`, or the `files` they came from. A
    manythings.org `cmn-eng.zip` holds English first: named cmn, en, it trained the direction the other way round
    than its name, in silence; one language's file named twice (a copy under the other language's name) trained a
    model to copy."""
    head, unreadable = [], None
    try:
        head.extend(itertools.islice(pairs, SAMPLE))
    except NMTError as err:  # a bad line among the first: said where it stands, after the pairs before it
        unreadable = err
    written = [pair for pair in head if pair[0] and pair[1]]
    if swapped_sides(written, (spec.source_lang, spec.target_lang)):
        raise NMTError(f"the source side of the first pairs is written as {spec.target_lang} is, the target side as "
                       f"{spec.source_lang}: {fix}")
    if swapped_by_words(written, (spec.source_lang, spec.target_lang)):  # languages of one script: their words tell
        raise NMTError(f"the source side of the first pairs reads as {spec.target_lang}, the target side as "
                       f"{spec.source_lang} (by their commonest words): {fix}")
    copies = sum(source.strip() == target.strip() for source, target in written)
    one_language = base_language(spec.source_lang) == base_language(spec.target_lang)  # correction, paraphrase
    if len(written) >= MIN_PAIRS_TO_TELL and copies > len(written) / 2 and not one_language:
        # A sentence may be its own translation ("OK.", a name), not most of them: one text named for both sides.
        raise NMTError(f"{copies:,} of the first {len(written):,} pairs have the same text on both sides: one "
                       f"language's text named as both the source and the target ({files})?")
    yield from head
    if unreadable:
        raise unreadable
    yield from pairs
