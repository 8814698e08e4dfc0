"""Fetch the corpus zip (http(s), file:// or a local path), verify it, extract safely, install atomically."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from nmt.errors import NMTError

CORPUS_DIR = "fra-eng"
CORPUS_FILE = "fra.txt"
CHUNK = 1 << 16


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def corpus_path(data_dir: Path) -> Path:
    return Path(data_dir) / CORPUS_DIR / CORPUS_FILE


def download_corpus(url: str, data_dir: Path, expected_sha256: str | None, force: bool = False,
                    progress: bool = True) -> Path:
    """Install `fra.txt` under `data_dir/fra-eng/`; a valid existing copy is kept unless `force`.

    `expected_sha256=None` accepts any release whose lines have 2 or 3 tab-separated columns.
    """
    data_dir = Path(data_dir)
    target = corpus_path(data_dir)
    if target.is_file() and not force and _is_valid(target, expected_sha256):
        return target
    data_dir.mkdir(parents=True, exist_ok=True)
    archive = _fetch(url, data_dir, progress)
    staging = Path(tempfile.mkdtemp(prefix=".fra-eng.", dir=data_dir))
    try:
        extracted = extract_corpus(archive, staging)
        _verify(extracted, expected_sha256)
        _install_dir(staging, target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _is_valid(path: Path, expected_sha256: str | None) -> bool:
    if expected_sha256 is None:
        return path.stat().st_size > 0
    return sha256_file(path) == expected_sha256


def _verify(path: Path, expected_sha256: str | None) -> None:
    if expected_sha256 is not None:
        actual = sha256_file(path)
        if actual != expected_sha256:
            raise NMTError(
                f"corpus checksum mismatch: {CORPUS_FILE} has sha256 {actual}, expected {expected_sha256} "
                "(another release? pass --no-verify or set data.verify_checksum: false to accept it)")
    else:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip() and line.count("\t") not in (1, 2):
                    raise NMTError(f"{path.name} line {number}: expected 2 or 3 tab-separated columns")


def _install_dir(staging: Path, final: Path) -> None:
    """Replace `final` by `staging` with renames, so a good old copy survives until the new one is complete."""
    old = None
    if final.exists():
        old = final.with_name(final.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _fetch(url: str, data_dir: Path, progress: bool) -> Path:
    """Return a local path to the zip: local sources are used in place, HTTP(S) is downloaded resumably."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("http", "https"):
        return _http_download(url, data_dir / ".downloads", progress)
    if parsed.scheme == "file":
        local = Path(urllib.request.url2pathname(parsed.path))
    elif parsed.scheme in ("",) or (len(parsed.scheme) == 1 and os.name == "nt"):
        local = Path(url).expanduser()
    else:
        raise NMTError(f"unsupported corpus URL scheme {parsed.scheme!r} in {url} (use http(s)://, file:// or a path)")
    if not local.is_file():
        raise NMTError(f"corpus archive not found: {local}")
    return local


def _http_download(url: str, cache: Path, progress: bool) -> Path:
    """Stream into `<name>.part`, resuming with an HTTP Range request; rename when the body is complete."""
    cache.mkdir(parents=True, exist_ok=True)
    name = Path(urllib.parse.urlparse(url).path).name or "corpus.zip"
    final, part = cache / name, cache / (name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "nmt"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            if offset and response.status != 206:
                offset = 0  # the server ignored the Range header: start over
            total = response.headers.get("Content-Length")
            total = int(total) + offset if total is not None else None
            with open(part, "ab" if offset else "wb") as out, tqdm(
                total=total, initial=offset, unit="B", unit_scale=True, desc=f"download {name}",
                disable=not progress) as bar:
                for block in iter(lambda: response.read(CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
                out.flush()
                os.fsync(out.fileno())
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # range not satisfiable: the part file is already complete
            pass
        else:
            raise NMTError(f"download failed: HTTP {err.code} for {url}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise NMTError(f"download failed for {url}: {reason} (partial data kept for resume)") from None
    if total is not None and part.stat().st_size != total:
        raise NMTError(f"download of {url} incomplete: {part.stat().st_size} of {total} bytes (re-run to resume)")
    os.replace(part, final)
    return final


def _check_member_path(name: str) -> None:
    posix = PurePosixPath(name.replace("\\", "/"))
    if posix.is_absolute() or ".." in posix.parts or (posix.parts and ":" in posix.parts[0]):
        raise NMTError(f"refusing archive member {name!r}: its path escapes the target directory")


def extract_corpus(archive: Path, dest: Path) -> Path:
    """Extract the corpus members into `dest` and return the path of fra.txt.

    Every member path is checked before anything is written, so a zip-slip archive writes nothing at all.
    """
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
            for member in members:
                _check_member_path(member.filename)
            # Flattened into dest (fra-eng/fra.txt → dest/fra.txt); AppleDouble "._*" files are resource forks.
            named = {PurePosixPath(m.filename).name: m for m in members
                     if not PurePosixPath(m.filename).name.startswith("._")}
            if sum(PurePosixPath(m.filename).name == CORPUS_FILE for m in members) != 1:
                raise NMTError(f"{archive}: expected exactly one {CORPUS_FILE} in the archive")
            for name, member in named.items():
                with zf.open(member) as src, open(dest / name, "wb") as out:
                    shutil.copyfileobj(src, out, CHUNK)
            return dest / CORPUS_FILE
    except zipfile.BadZipFile:
        raise NMTError(f"{archive} is not a valid zip archive") from None
