"""How a text file of the user's is read: compressed (gzip, bzip2, xz), archived (zip, tar: one member, or a member
per language), UTF-8 with or without a byte-order mark, or UTF-16 with one. All told by the file's bytes, never its
name: a URL's file is named by its path (`.../download?id=7` saves as `download`).

`text_lines(path, language)` yields (line number, line) with one-line errors naming the file and line;
nmt/data/sources.py (aligned files) and nmt/data/pair_formats.py (files of pairs) read through it.
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import functools
import gzip
import io
import lzma
import os
import re
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, AnyStr, Iterable, Iterator

from nmt.data.bad_lines import RAISE, BadLines
from nmt.data.languages import base_language
from nmt.errors import NMTError, counted

ZIP_MAGIC = b"PK\x03\x04"
UTF16_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # how UTF-16 text starts (Excel's "Unicode Text")


def _archive_member(names: list[str], path: Path, language: str = "", partner: str = "") -> str:
    """Which file of an archive (zip or tar) holds the text: its one file (manythings.org's `deu-eng.zip` holds
    `deu.txt` beside `_about.txt`, its licence; macOS's `__MACOSX/` and `._*` resource forks are no text either), or,
    of line-aligned files, the one that ends in `language`'s code: OPUS's Moses zips (`en-fr.txt.zip`) hold
    `Tatoeba.en-fr.en` and `Tatoeba.en-fr.fr` beside a README, a LICENSE and an `.xml` of ids, and Europarl's
    `fr-en.tgz` its `europarl-v7.fr-en.en` and `.fr`. Where several end in it, the one that names the pair with
    `partner`, the other side's language: WMT's `training-parallel-europarl-v7.tgz` holds `europarl-v7.de-en.en`
    beside `.fr-en.en`, `.cs-en.en` and `.es-en.en`. The member is read, never extracted, so its path cannot escape
    anywhere."""
    members = [n for n in names if not n.startswith("__MACOSX/")
               and not PurePosixPath(n).name.startswith(("_about", "._"))]
    if len(members) == 1:
        return members[0]
    several = False  # files end in the language, and the pair named none or several of them
    if language:
        suffix = {n: PurePosixPath(n).suffix.lstrip(".") for n in members}
        for same in (lambda code: code.lower() == language.lower(),  # exactly, else as a language (zh_cn for cmn)
                     lambda code: base_language(code) == base_language(language)):
            named = [n for n in members if suffix[n] and same(suffix[n])]
            if len(named) > 1 and partner:
                several = True
                named = [n for n in named if _names_pair(n, language, partner)] or named
            if len(named) == 1:
                return named[0]
    listed = ", ".join(members[:6]) + (", ..." if len(members) > 6 else "")
    paired = f" naming the pair {language}-{partner} or {partner}-{language}" if several else ""
    per_language = f", and not exactly one of them ends in .{language}{paired}" if language else ""
    raise NMTError(f"{path} is an archive of {counted(len(members), 'file')}{f' ({listed})' if members else ''}"
                   f"{per_language}: a corpus archive holds one text file, or, as data.source_file and "
                   "data.target_file, one file per language named by its code (OPUS's Tatoeba.en-fr.en); unpack it "
                   "and name the file instead")


def _names_pair(name: str, language: str, partner: str) -> bool:
    """Whether an archive's file is named for the pair of `language` and `partner` (`de-en` or `en-de`)."""
    codes = [re.escape(code.lower()) for code in (language, partner)]
    pair = rf"(?<![a-z])({codes[0]}-{codes[1]}|{codes[1]}-{codes[0]})(?![a-z])"
    return re.search(pair, PurePosixPath(name).name.lower()) is not None


# (magic bytes, name, opener, the tool that writes its text to stdout)
_COMPRESSIONS = ((b"\x1f\x8b", "gzip", gzip.open, "zcat"), (b"BZh", "bzip2", bz2.open, "bzcat"),
                 (b"\xfd7zX", "xz", lzma.open, "xzcat"), (ZIP_MAGIC, "zip", None, "unzip -p"))


def compression(magic: bytes) -> tuple[str, str] | None:
    """(name, the tool that decompresses it to stdout) of data that starts with `magic`, its first 4 bytes; None:
    not compressed."""
    return next(((name, tool) for start, name, _, tool in _COMPRESSIONS if magic.startswith(start)), None)


def _decompressor(magic: bytes):
    """The opener of gzip, bzip2 or xz data that starts with `magic` (its first 4 bytes), or None."""
    return next((opener for start, _, opener, _ in _COMPRESSIONS if magic.startswith(start)), None)


@contextlib.contextmanager
def _decompressed(handle: IO[bytes]) -> Iterator[IO[bytes]]:
    """`handle`'s bytes, gunzipped, bunzipped or unxz'd as its magic bytes say."""
    magic = handle.read(4)
    handle.seek(0)
    opener = _decompressor(magic)
    if opener is None:
        yield handle
    else:
        with opener(handle, "rb") as stream:
            yield stream


@contextlib.contextmanager
def _open_bytes(path: Path, language: str = "", partner: str = "") -> Iterator[tuple[str, IO[bytes]]]:
    """(name, bytes) of `path`'s text: its own name, or the name of the archive member read. gzip, bzip2, xz, zip and
    tar (compressed or not) are told by their bytes, not the name (a URL's file is named by its path:
    `.../download?id=7` saves as `download`); `language` (and `partner`) pick an archive's member. Read as text, a
    `.tgz` trained its tar headers as sentences."""
    with open(path, "rb") as handle, _decompressed(handle) as stream:
        head = stream.read(512)
        stream.seek(0)
        if head[:4] == b"PAR1":
            raise NMTError(f"{path} is a Parquet file (a Hugging Face dataset's?): save it as JSON lines "
                           "(dataset.to_json(\"pairs.jsonl\")) or a TSV")
        if head[:4] == ZIP_MAGIC:
            with zipfile.ZipFile(stream) as archive:
                if "xl/workbook.xml" in archive.namelist():
                    raise NMTError(f"{path} is an Excel workbook: save it as \"Unicode Text\" or tab-separated text")
                name = _archive_member([m.filename for m in archive.infolist() if not m.is_dir()], path, language,
                                       partner)
                with archive.open(name) as text:
                    yield name, text
        elif head[257:262] == b"ustar":  # a tar header's magic
            version = os.stat(path)
            files = _tar_files(str(path), version.st_size, version.st_mtime_ns, version.st_ino)
            name = _archive_member(list(files), path, language, partner)
            with tarfile.open(fileobj=stream, mode="r:") as archive, archive.extractfile(files[name]) as text:
                yield name, text
        elif head[:2] in UTF16_MARKS:
            # Only a line feed ends a line, as in UTF-8 text; lines come back as UTF-8 for the reader.
            lines = io.TextIOWrapper(stream, encoding="utf-16", newline="\n")
            yield Path(path).name, (line.encode("utf-8") for line in lines)
        else:
            yield Path(path).name, stream


@functools.lru_cache(maxsize=8)
def _tar_files(path: str, size: int, modified_ns: int, inode: int) -> dict[str, tarfile.TarInfo]:
    """A tarball's files by name (where each one's bytes lie), listed once per version of the file: a listing reads
    the whole archive (a .tgz decompressed end to end), and preparation opens a corpus's tarball seven times (its
    fingerprint, its format, each side), each of which listed it again."""
    with open(path, "rb") as handle, _decompressed(handle) as stream, \
            tarfile.open(fileobj=stream, mode="r:") as archive:
        return {member.name: member for member in archive.getmembers() if member.isfile()}


def text_lines(path: Path, language: str = "", partner: str = "", bad: BadLines = RAISE) -> Iterator[tuple[int, str]]:
    """(line number, text without its line ending) of a UTF-8 (or BOM-marked UTF-16) file, plain or compressed, or
    of an archive's file (its one, or `language`'s: `partner`, the other side's, picks among several); a line that
    is not UTF-8 is `bad`'s: an error, or skipped as an empty line (nmt/data/bad_lines.py). A byte-order mark
    (Excel's and Notepad's "UTF-8" exports start with one) is no part of the first line: left on, it hid a TSV's
    header, which then trained as a pair."""
    with _read_errors(path), _open_bytes(path, language, partner) as (_, handle):
        for number, raw in enumerate(line_feed_lines(handle), 1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                bad.meet(f"{path} line {number}: not UTF-8 text (byte {err.start}): save it as UTF-8 (Excel: \"CSV "
                         "UTF-8\" or \"Unicode Text\"; or iconv -f WINDOWS-1252 -t UTF-8, naming its encoding)", path)
                text = ""
            yield number, text.removesuffix("\n").removesuffix("\r")


def ends_lines_in_cr_alone(text: AnyStr) -> bool:
    """Whether text read up to its first line feed is all of a text whose lines end in CR alone: it holds a CR before
    its end and no line feed. Classic Mac OS wrote such text, and Excel for Mac still does as "Tab Delimited Text
    (Mac)" and "CSV (Macintosh)"; read at line feeds only, a whole corpus was one line. Where a line feed ends a line,
    a lone CR inside one stays text (`cut` and `wc -l` read it so)."""
    cr, lf = ("\r", "\n") if isinstance(text, str) else (b"\r", b"\n")
    return lf not in text and cr in text.rstrip(cr)


def line_feed_lines(lines: Iterable[AnyStr]) -> Iterator[AnyStr]:
    """`lines` (a file or stream read line by line: each ends in a line feed, the last perhaps not) as they are, or,
    where the first is a whole text of lines ended by CR alone (`ends_lines_in_cr_alone`), its lines, each ending in
    a line feed instead."""
    lines = iter(lines)
    first = next(lines, None)
    if first is None:
        return
    if not ends_lines_in_cr_alone(first):
        yield first
        yield from lines
        return
    cr, lf = ("\r", "\n") if isinstance(first, str) else (b"\r", b"\n")
    *ended, last = first.split(cr)
    yield from (line + lf for line in ended)
    if last:
        yield last


def piped_lines(data: bytes, name: str) -> list[str]:
    """The lines of bytes read whole from stdin or a pipe (`--ref <(cut -f2 test.tsv)`), which cannot be opened again
    as `text_lines` opens a file: gzip, bzip2 or xz data decompressed, UTF-16 told by its BOM, UTF-8's BOM dropped;
    only a line feed ends a line (str.splitlines would also break at U+2028, U+0085 or a lone CR inside a sentence),
    unless none does and CRs end them (`ends_lines_in_cr_alone`).
    An archive (zip, tar) is refused: it names no one file."""
    with _read_errors(Path(name)):
        opener = _decompressor(data[:4])
        if opener is not None:
            with opener(io.BytesIO(data), "rb") as stream:
                data = stream.read()
    if data[:4] == ZIP_MAGIC or data[257:262] == b"ustar":
        raise NMTError(f"{name} is an archive: save its file of sentences and name that file")
    utf16 = data[:2] in UTF16_MARKS
    try:
        text = data.decode("utf-16" if utf16 else "utf-8-sig")
    except UnicodeDecodeError as err:
        raise NMTError(f"{name}: not {'UTF-16' if utf16 else 'UTF-8'} text (byte {err.start})") from None
    if ends_lines_in_cr_alone(text):
        text = text.replace("\r", "\n")
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines[-1] == "" else lines


def text_name(path: Path, language: str = "", partner: str = "") -> str:
    """The name of the file whose text `text_lines` reads: `path`'s own, or its archive member's (Kaggle's
    `archive.zip` holds an `en-fr.csv`), which says what the text is where the archive's name cannot."""
    with _read_errors(path), _open_bytes(path, language, partner) as (name, _):
        return name


@contextlib.contextmanager
def _read_errors(path: Path) -> Iterator[None]:
    """A file that cannot be read, decompressed or decoded: one line naming it."""
    try:
        yield
    except OSError as err:  # gzip.BadGzipFile is an OSError
        raise NMTError(f"cannot read {path}: {err.strerror or err}") from None
    except (EOFError, zipfile.BadZipFile, tarfile.TarError, lzma.LZMAError, RuntimeError,
            NotImplementedError) as err:  # truncated, corrupt, an encrypted zip, deflate64
        raise NMTError(f"cannot read {path}: {err}") from None
    except UnicodeError as err:  # UTF-16 cut mid-character
        raise NMTError(f"{path}: not UTF-16 text, though it starts as such ({err.reason})") from None
