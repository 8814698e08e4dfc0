"""Fetch the corpus zip (http(s), file:// or a local path), verify it, extract safely, install atomically."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import netrc
import os
import re
import shutil
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from nmt.atomic import install_dir, staging_dir, unwritable_reason, write_text_atomic
from nmt.errors import NMTError, warn
from nmt.lock import DirectoryLock

CORPUS_DIR = "fra-eng"
CORPUS_FILE = "fra.txt"
CHUNK = 1 << 16
# A server that trickles (bytes, but too few) never trips a socket timeout: give up when fewer than
# STALL_MIN_BYTES arrived in the last STALL_WINDOW_S seconds; the partial file stays for a later resume.
STALL_WINDOW_S = 60.0
STALL_MIN_BYTES = 16 * 1024


class DownloadFailed(NMTError):
    """The server could not be reached, refused, stalled or ended the body early; `reason` says why in a few words
    (for the warning of a fallback to a copy downloaded before)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def corpus_path(data_dir: Path) -> Path:
    return Path(data_dir) / CORPUS_DIR / CORPUS_FILE


def check_data_dir_writable(data_dir: Path, doing: str) -> None:
    """A data directory this user cannot write (a shared one, read-only for them) is refused with what to do before
    its lock is asked for: that said "cannot lock DIR: Permission denied", with nothing about --data-dir."""
    if reason := unwritable_reason(data_dir):
        raise NMTError(f"cannot {doing} in {data_dir} ({reason}): name a data directory of your own with --data-dir")


def download_corpus(url: str, data_dir: Path, expected_sha256: str | None, force: bool = False,
                    progress: bool = True) -> Path:
    """Install `fra.txt` under `data_dir/fra-eng/`; a valid existing copy is kept unless `force`.

    `expected_sha256=None` accepts any release whose lines have 2 or 3 tab-separated columns.
    """
    data_dir = Path(data_dir)
    target = corpus_path(data_dir)
    if target.is_file() and not force and _is_valid(target, expected_sha256):
        return target
    if data_dir.exists() and not data_dir.is_dir():
        raise NMTError(f"data directory {data_dir} exists and is not a directory")
    local = _local_source(url)  # bad schemes and missing or broken local archives fail before anything is written
    check_data_dir_writable(data_dir, "install the corpus")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise NMTError(f"cannot create data directory {data_dir}: {err.strerror}") from None
    with DirectoryLock(data_dir, wait=True):
        for stale in data_dir.glob(".fra-eng.*"):  # a killed extraction's staging (we hold the lock: not live)
            shutil.rmtree(stale, ignore_errors=True)
        archive = local
        if archive is None:
            archive = data_dir / ".downloads" / _file_name(url, "corpus.zip")
            _http_download(url, archive, progress)
        staging = staging_dir(target.parent)  # .fra-eng.*, the name the line above cleans up
        try:
            extracted = extract_corpus(archive, staging)
            _verify(extracted, expected_sha256)
            install_dir(staging, target.parent)
        except OSError as err:
            raise NMTError(f"cannot install the corpus in {data_dir}: {err.strerror}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _is_valid(path: Path, expected_sha256: str | None) -> bool:
    if expected_sha256 is None:
        return path.stat().st_size > 0 and _has_pairs(path)
    return sha256_file(path) == expected_sha256


def _verify(path: Path, expected_sha256: str | None) -> None:
    if expected_sha256 is not None:
        actual = sha256_file(path)
        if actual != expected_sha256:
            raise NMTError(
                f"corpus checksum mismatch: {CORPUS_FILE} has sha256 {actual}, expected {expected_sha256} "
                "(another release? pass --no-verify or set data.verify_checksum: false to accept it)")
    else:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip() and line.count("\t") not in (1, 2):
                    raise NMTError(f"{path.name} line {number}: expected 2 or 3 tab-separated columns")
        if not _has_pairs(path):
            raise NMTError(f"{CORPUS_FILE} in the archive holds no sentence pairs")


def _has_pairs(path: Path) -> bool:
    with open(path, "rb") as handle:
        return any(line.strip() for line in handle)


def parse_url(text: str) -> urllib.parse.ParseResult:
    """`text` (a URL or a path) as urllib reads it; what it cannot read (`https://[::1/x`: "Invalid IPv6 URL"), an
    http(s) URL's port that is no port, or a space in one is a one-line error naming it, not an internal error."""
    try:
        parsed = urllib.parse.urlparse(text)
        if parsed.scheme in ("http", "https"):  # urllib lowers the scheme
            parsed.port  # noqa: B018 - raises on a port that is no number from 0 to 65535
    except ValueError as err:
        raise NMTError(f"{text} is not a valid URL ({err})") from None
    if parsed.scheme in ("http", "https") and re.search(r"[\x00-\x20\x7f]", text):
        # http.client refused it mid-download, an internal error ("URL can't contain control characters").
        raise NMTError(f"{text!r} is not a valid URL (it holds a space or a control character: percent-encode it, "
                       "a space as %20)")
    return parsed


def split_credentials(url: str) -> tuple[str, str | None]:
    """`https://user:token@host/corpus.tsv` (wget's and curl's way to a server behind a password) as the URL without
    its user:password@ and the Basic Authorization header it asks for (None without one): urllib sent the whole
    netloc to the resolver ("Name or service not known")."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    user, password = urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or "")
    address = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return address, "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def netrc_authorization(host: str) -> str | None:
    """The Basic Authorization header for `host` from the user's netrc ($NETRC, else ~/.netrc: curl's, wget's and
    pip's place for a password), so that a token need not be in the URL, where the run's config.yaml keeps it."""
    try:
        entry = netrc.netrc(os.environ.get("NETRC") or None).authenticators(host)
    except (FileNotFoundError, RuntimeError):  # no netrc, or no home directory to look in
        return None
    except (netrc.NetrcParseError, OSError) as err:
        raise NMTError(f"cannot read the netrc file for {host}'s password: {err}") from None
    if entry is None:
        return None
    login, _, password = entry
    return "Basic " + base64.b64encode(f"{login}:{password or ''}".encode()).decode("ascii")


def shown_url(url: str) -> str:
    """`url` as messages and records show it: a password in it replaced by ***, so that an error line, train.log or
    the download's record never holds it."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:***@{host}"))


def user_path(text: str, what: str) -> Path:
    """A path as a user types it, `~` and `~user` expanded: `~nosuchuser/x.tsv` was an internal RuntimeError.
    `what` names the setting in the error (data.corpus, the corpus URL)."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # pathlib's "Could not determine home directory"
        user = text[1:].split("/", 1)[0]
        raise NMTError(f"{what} {text}: " + (f"no user {user!r} on this machine to expand ~{user} for" if user
                                             else "no home directory to expand ~ for")) from None


def file_url_path(url: str) -> Path:
    """The path a file:// URL names on this machine (file:///p or file://localhost/p); a URL naming another host
    is refused rather than read as a local path."""
    parsed = parse_url(url)
    if parsed.netloc not in ("", "localhost"):
        raise NMTError(f"{url} names a file on host {parsed.netloc!r}: file:// URLs name this machine's files "
                       "(file:///path)")
    return Path(urllib.request.url2pathname(parsed.path))


def _local_source(url: str) -> Path | None:
    """The local zip a file:// URL or a path names (checked), or None for an http(s) URL."""
    parsed = parse_url(url)
    if parsed.scheme in ("http", "https"):
        return None
    if parsed.scheme == "file":
        local = file_url_path(url)
    elif parsed.scheme in ("",) or (len(parsed.scheme) == 1 and os.name == "nt"):
        local = user_path(url, "corpus URL")
    else:
        raise NMTError(f"unsupported corpus URL scheme {parsed.scheme!r} in {url} (use http(s)://, file:// or a path)")
    if local.is_dir():
        raise NMTError(f"{local} is a directory: give the corpus zip archive itself")
    if not local.is_file():
        raise NMTError(f"corpus archive not found: {local}")
    if not zipfile.is_zipfile(local):
        raise NMTError(f"{local} is not a valid zip archive")
    return local


def _open_part(part: Path, append: bool):
    """The partial download, never through a link someone planted in its place."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_APPEND if append else os.O_TRUNC)
    try:
        return os.fdopen(os.open(part, flags, 0o644), "ab" if append else "wb")
    except OSError as err:
        if part.is_symlink():
            raise NMTError(f"{part} is a symbolic link; refusing to write through it") from None
        raise NMTError(f"cannot write {part}: {err.strerror}") from None


def _complete_after_416(err: urllib.error.HTTPError, offset: int) -> bool:
    """416 on a resume: the part is complete if the server's full size (Content-Range: bytes */N) equals it."""
    content_range = err.headers.get("Content-Range", "") if err.headers else ""
    size = content_range.rpartition("/")[2]
    return size.isdigit() and int(size) == offset


def _file_name(url: str, default: str) -> str:
    return Path(parse_url(url).path).name or default


def proxy_used(url: str) -> str:
    """", through the proxy P (its_proxy)" where the environment sends `url` through a proxy (http_proxy, https_proxy;
    not where no_proxy exempts its host), else "": a proxy that cannot be reached (http_proxy=abc) failed with the
    proxy's error alone ("Name or service not known" for a host that resolves), which named the URL, not the proxy."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return ""
    names = (f"{parts.scheme}_proxy", f"{parts.scheme.upper()}_PROXY")
    setting = next((name for name in names if os.environ.get(name)), names[0])
    return f" through the proxy {proxy} ({setting})"


def _http_download(url: str, final: Path, progress: bool, revalidate: dict | None = None) -> dict | None:
    """Stream `url` into `<final>.part`, resuming with an HTTP Range request, and rename it to `final` when the body
    is complete; return the response's validators (ETag, Last-Modified). `revalidate`: those of the copy already at
    `final`, sent as a conditional request: None comes back when the server answers 304 (the copy is current)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + ".part")
    if revalidate is not None:
        part.unlink(missing_ok=True)  # a part beside a whole copy is of another version: not resumable
    offset = part.stat().st_size if part.is_file() and not part.is_symlink() else 0
    request = _download_request(url, offset, revalidate)
    url = shown_url(url)  # in every message below
    total, validators = None, {}
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            validators = {"etag": response.headers.get("ETag"), "last_modified": response.headers.get("Last-Modified")}
            if offset and response.status != 206:
                offset = 0  # the server ignored the Range header: start over
            length = response.headers.get("Content-Length")
            total = int(length) + offset if length is not None else None
            with _open_part(part, append=bool(offset)) as out, tqdm(
                    total=total, initial=offset, unit="B", unit_scale=True, desc=f"download {final.name}",
                    disable=not progress) as bar:
                _stream(response, out, bar, url)
                out.flush()
                os.fsync(out.fileno())
    except urllib.error.HTTPError as err:
        if err.code == 304 and revalidate is not None:
            return None
        if err.code == 416 and offset and _complete_after_416(err, offset):
            total = offset  # the part file is already the whole body
        elif err.code == 416:
            part.unlink(missing_ok=True)  # a part larger than the file (it changed on the server): start over
            raise NMTError(f"download of {url}: the partial file no longer fits the server's copy; removed it, "
                           "re-run to download again") from None
        else:
            raise DownloadFailed(f"download failed: HTTP {err.code} for {url}", f"HTTP {err.code}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        raise _network_failure(err, part, url) from None
    if total is not None and part.stat().st_size != total:
        raise DownloadFailed(f"download of {url} incomplete: {part.stat().st_size} of {total} bytes (re-run to "
                             "resume)", "the connection ended early")
    os.replace(part, final)
    return validators


def _download_request(url: str, offset: int, revalidate: dict | None) -> urllib.request.Request:
    """The GET for `url`: its credentials (in the URL, or ~/.netrc's) for its own host only, a Range from `offset`
    to resume a part file, and the copy's validators (`revalidate`) as a conditional request."""
    address, authorization = split_credentials(url)
    authorization = authorization or netrc_authorization(urllib.parse.urlsplit(address).hostname or "")
    request = urllib.request.Request(address, headers={"User-Agent": "nmt"})
    if authorization:  # not sent on to where a redirect points (urllib copies the other headers there)
        request.add_unredirected_header("Authorization", authorization)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    if revalidate and revalidate.get("etag"):
        request.add_header("If-None-Match", revalidate["etag"])
    if revalidate and revalidate.get("last_modified"):
        request.add_header("If-Modified-Since", revalidate["last_modified"])
    return request


def _network_failure(err: Exception, part: Path, url: str) -> DownloadFailed:
    """What a download that met no (usable) answer says: why, and what to do (resume, a local copy, or the
    certificate to trust)."""
    # http.client's own errors are no OSError: a port that speaks no HTTP (BadStatusLine), a broken answer.
    reason = (f"no HTTP answer ({type(err).__name__} {str(err).strip()!r})"
              if isinstance(err, http.client.HTTPException) else getattr(err, "reason", err))
    kept = part.stat().st_size if part.is_file() else 0
    then = (f"{kept:,} bytes kept: re-run to resume" if kept else
            "nothing downloaded; without network access, give a local copy instead: a path or a file:// URL")
    if isinstance(reason, ssl.SSLCertVerificationError):  # the network is there: the advice above misled
        bundle = os.environ.get("SSL_CERT_FILE")
        then = ("a certificate this machine does not trust: a self-signed server, or a proxy that inspects TLS; "
                + (f"SSL_CERT_FILE={bundle} does not hold the CA that signs it" if bundle else
                   "name the CA certificate that signs it with SSL_CERT_FILE=PATH"))
    return DownloadFailed(f"download failed for {url}{proxy_used(url)}: {reason} ({then})", str(reason))


def fetch_file(url: str, cache: Path, progress: bool = True, warn=warn) -> Path:
    """A corpus file of the user's (not the built-in zip) fetched over HTTP(S) into `cache` once, resumed and atomic.
    Every later call (prepare, train, a resume, evaluate) asks the server whether it changed since (ETag /
    Last-Modified: a 304 keeps the copy, a new version replaces it) and, when the server cannot be asked (offline),
    goes on with the copy, saying so: before, each command downloaded the whole file again, and none worked offline."""
    address = split_credentials(url)[0]  # a new token for the same file keeps its copy
    folder = Path(cache) / hashlib.sha256(address.encode()).hexdigest()[:12]  # two URLs may end in one file name
    final, record = folder / _file_name(url, "corpus.tsv"), folder / "source.json"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise NMTError(f"cannot download {shown_url(url)} into {folder}: {err.strerror}") from None
    with DirectoryLock(folder, wait=True):  # torchrun's ranks ask at once: one writes, the others find its copy
        cached = _read_record(record) if final.is_file() else None
        try:
            validators = _http_download(url, final, progress, revalidate=cached)
        except DownloadFailed as err:
            if cached is None:
                raise
            warn(f"could not ask {shown_url(url)} whether it changed ({err.reason}): using the copy downloaded "
                 f"{cached.get('downloaded', 'before')}")
            return final
        if validators is not None:
            downloaded = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            kept = {"url": shown_url(url), **validators, "downloaded": downloaded}
            write_text_atomic(record, json.dumps(kept) + "\n")
    return final


def _read_record(path: Path) -> dict:
    """What `fetch_file` recorded of a download; {} when missing or damaged (the copy is then downloaded again)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _stream(response, out, bar, url: str) -> None:
    window_start, window_bytes = time.monotonic(), 0
    # read1: whatever one receive brings (read(n) would wait for all n bytes and never see a trickle).
    for block in iter(lambda: response.read1(CHUNK), b""):
        out.write(block)
        bar.update(len(block))
        window_bytes += len(block)
        now = time.monotonic()
        if now - window_start >= STALL_WINDOW_S:
            if window_bytes < STALL_MIN_BYTES:
                raise DownloadFailed(f"download of {url} stalled: {window_bytes} bytes in the last "
                                     f"{STALL_WINDOW_S:.0f} s (partial data kept; re-run to resume)", "stalled")
            window_start, window_bytes = now, 0


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
                raise NMTError(f"{archive}: expected exactly one {CORPUS_FILE} in the archive (the built-in "
                               "English–French corpus); another pair's zip (manythings.org's deu-eng.zip) needs no "
                               "download: set data.corpus to it, with data.source_lang and data.target_lang")
            for name, member in named.items():
                with zf.open(member) as src, open(dest / name, "wb") as out:
                    shutil.copyfileobj(src, out, CHUNK)
            return dest / CORPUS_FILE
    except zipfile.BadZipFile:
        raise NMTError(f"{archive} is not a valid zip archive") from None
