import hashlib
import http.server
import os
import shutil
import stat
import subprocess
import sys
import threading

import pytest

from conftest import make_zip, toy_corpus_text
from nmt.data.download import corpus_path, download_corpus, extract_corpus
from nmt.errors import NMTError
from tests_helpers import serving, serving_folder


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def http_root(tmp_path):
    """A real HTTP server on loopback serving files from a temporary folder."""
    root = tmp_path / "www"
    root.mkdir()
    with serving_folder(root) as base:
        yield root, base


def test_http_download_verifies_and_installs(http_root, tmp_path):
    root, base = http_root
    text = toy_corpus_text()
    (root / "fra-eng.zip").write_bytes(make_zip({"fra-eng/fra.txt": text, "fra-eng/_about.txt": "about",
                                                 "__MACOSX/fra-eng/._fra.txt": b"\x00junk"}))
    data = tmp_path / "data"
    path = download_corpus(f"{base}/fra-eng.zip", data, sha(text), progress=False)
    assert path == corpus_path(data) and path.read_text() == text
    assert sorted(p.name for p in (data / "fra-eng").iterdir()) == ["_about.txt", "fra.txt"]  # no __MACOSX junk
    assert not list(data.glob(".fra-eng.*")), "staging directory left behind"
    # A second call with a valid copy does nothing, even when the source has vanished.
    (root / "fra-eng.zip").unlink()
    assert download_corpus(f"{base}/fra-eng.zip", data, sha(text), progress=False) == path


def test_http_download_resumes_partial_file(http_root, tmp_path):
    root, base = http_root
    text = toy_corpus_text() * 50
    blob = make_zip({"fra-eng/fra.txt": text})
    (root / "fra-eng.zip").write_bytes(blob)
    data = tmp_path / "data"
    (data / ".downloads").mkdir(parents=True)
    # SimpleHTTPRequestHandler ignores Range, so the client must notice the 200 and start over correctly.
    (data / ".downloads" / "fra-eng.zip.part").write_bytes(b"garbage-prefix")
    path = download_corpus(f"{base}/fra-eng.zip", data, sha(text), progress=False)
    assert path.read_text() == text
    assert (data / ".downloads" / "fra-eng.zip").read_bytes() == blob


def test_checksum_mismatch_fails_and_keeps_good_copy(tmp_path):
    good, bad = toy_corpus_text(), toy_corpus_text().replace("Merci", "Merci beaucoup")
    data = tmp_path / "data"
    (tmp_path / "good.zip").write_bytes(make_zip({"fra-eng/fra.txt": good}))
    (tmp_path / "bad.zip").write_bytes(make_zip({"fra-eng/fra.txt": bad}))
    download_corpus(str(tmp_path / "good.zip"), data, sha(good), progress=False)
    with pytest.raises(NMTError) as err:
        download_corpus(str(tmp_path / "bad.zip"), data, sha(good), force=True, progress=False)
    assert sha(bad) in str(err.value) and sha(good) in str(err.value)
    assert corpus_path(data).read_text() == good
    assert sorted(p.name for p in data.iterdir()) == [".lock", "fra-eng"]


def test_mismatch_on_fresh_dir_leaves_nothing(tmp_path):
    (tmp_path / "bad.zip").write_bytes(make_zip({"fra-eng/fra.txt": "a\tb\n"}))
    data = tmp_path / "data"
    with pytest.raises(NMTError, match="checksum mismatch"):
        download_corpus(str(tmp_path / "bad.zip"), data, "0" * 64, progress=False)
    assert not corpus_path(data).exists() and [p.name for p in data.iterdir()] == [".lock"]


@pytest.mark.parametrize("evil", ["../escape.txt", "/tmp/nmt-absolute-escape.txt", "fra-eng/../../escape.txt",
                                  "..\\escape.txt", "C:/escape.txt"])
def test_zip_slip_refused_before_anything_is_extracted(tmp_path, evil):
    """Every member is checked before the first is written: the good fra.txt, listed first, must not appear."""
    archive = tmp_path / "evil.zip"
    archive.write_bytes(make_zip({"fra-eng/fra.txt": toy_corpus_text(), evil: "pwned"}))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(NMTError, match="escapes the target"):
        extract_corpus(archive, dest)
    assert list(dest.iterdir()) == []
    data = tmp_path / "data"
    with pytest.raises(NMTError, match="escapes the target"):
        download_corpus(str(archive), data, None, progress=False)
    assert not corpus_path(data).exists() and not list(data.glob(".fra-eng.*"))


def test_file_url_and_three_columns_with_opt_out(tmp_path):
    text = toy_corpus_text(columns=3)
    archive = tmp_path / "new release.zip"
    archive.write_bytes(make_zip({"fra-eng/fra.txt": text}))
    with pytest.raises(NMTError, match="checksum mismatch"):
        download_corpus(archive.as_uri(), tmp_path / "d1", sha(toy_corpus_text()), progress=False)
    path = download_corpus(archive.as_uri(), tmp_path / "d2", None, progress=False)
    assert path.read_text() == text


def test_another_pairs_zip_is_pointed_to_data_corpus(tmp_path):
    archive = tmp_path / "deu-eng.zip"
    archive.write_bytes(make_zip({"deu.txt": "Hi.\tHallo!\n", "_about.txt": "CC-BY"}))
    with pytest.raises(NMTError, match=r"deu-eng.zip: expected exactly one fra.txt in the archive \(the built-in "
                                       r"English–French corpus\); another pair's zip .* needs no download: set "
                                       r"data.corpus to it"):
        download_corpus(str(archive), tmp_path / "data", None, progress=False)
    assert not (tmp_path / "data" / "fra-eng").exists()


def test_missing_source_and_bad_scheme(tmp_path):
    with pytest.raises(NMTError, match="not found"):
        download_corpus(str(tmp_path / "nope.zip"), tmp_path / "d", None, progress=False)
    with pytest.raises(NMTError, match="unsupported corpus URL scheme"):
        download_corpus("ftp://example.invalid/x.zip", tmp_path / "d", None, progress=False)


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves one blob with real Range support (206, and 416 with Content-Range: bytes */N past the end)."""

    blob = b""
    trickle = False

    def do_GET(self):  # noqa: N802 - http.server's name
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].split("=")[1].split("-")[0])
            if start >= len(self.blob):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(self.blob)}")
                self.end_headers()
                return
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(self.blob) - start))
        self.end_headers()
        if self.trickle:
            import time

            for byte in self.blob[start:start + 40]:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
            return
        self.wfile.write(self.blob[start:])

    def log_message(self, *args):
        pass


@pytest.fixture
def range_server():
    handler = type("Handler", (RangeHandler,), {})  # a subclass per test: blob and trickle are class state
    with serving(handler) as base:
        yield handler, f"{base}/fra-eng.zip"


def test_real_range_resume_appends_the_rest(range_server, tmp_path):
    handler, url = range_server
    text = toy_corpus_text() * 50
    handler.blob = make_zip({"fra-eng/fra.txt": text})
    data = tmp_path / "data"
    (data / ".downloads").mkdir(parents=True)
    (data / ".downloads" / "fra-eng.zip.part").write_bytes(handler.blob[:100])
    assert download_corpus(url, data, sha(text), progress=False).read_text() == text


def test_complete_part_answered_416_installs_instead_of_crashing(range_server, tmp_path):
    handler, url = range_server
    text = toy_corpus_text()
    handler.blob = make_zip({"fra-eng/fra.txt": text})
    data = tmp_path / "data"
    (data / ".downloads").mkdir(parents=True)
    (data / ".downloads" / "fra-eng.zip.part").write_bytes(handler.blob)  # complete, but never renamed
    assert download_corpus(url, data, sha(text), progress=False).read_text() == text


def test_trickling_server_is_a_clear_error_not_a_hang(range_server, tmp_path, monkeypatch):
    from nmt.data import download

    handler, url = range_server
    handler.blob, handler.trickle = make_zip({"fra-eng/fra.txt": toy_corpus_text() * 50}), True
    monkeypatch.setattr(download, "STALL_WINDOW_S", 0.5)
    monkeypatch.setattr(download, "STALL_MIN_BYTES", 1000)
    with pytest.raises(NMTError, match=r"stalled: \d+ bytes in the last 0 s .*re-run to resume"):
        download_corpus(url, tmp_path / "data", None, progress=False)
    assert (tmp_path / "data" / ".downloads" / "fra-eng.zip.part").stat().st_size > 0


def test_download_never_writes_through_a_planted_link(range_server, tmp_path):
    handler, url = range_server
    handler.blob = make_zip({"fra-eng/fra.txt": toy_corpus_text()})
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "data" / ".downloads").mkdir(parents=True)
    (tmp_path / "data" / ".downloads" / "fra-eng.zip.part").symlink_to(victim)
    with pytest.raises(NMTError, match="symbolic link"):
        download_corpus(url, tmp_path / "data", None, progress=False)
    assert victim.read_text() == "precious"


def test_stale_staging_of_a_killed_extraction_is_removed(tmp_path):
    data = tmp_path / "data"
    (data / ".fra-eng.abc123").mkdir(parents=True)
    (data / ".fra-eng.abc123" / "fra.txt").write_text("half")
    (tmp_path / "c.zip").write_bytes(make_zip({"fra-eng/fra.txt": toy_corpus_text()}))
    download_corpus(str(tmp_path / "c.zip"), data, None, progress=False)
    assert not list(data.glob(".fra-eng.*"))


def test_empty_corpus_without_checksum_is_refused(tmp_path):
    (tmp_path / "c.zip").write_bytes(make_zip({"fra-eng/fra.txt": "\n\n"}))
    with pytest.raises(NMTError, match="holds no sentence pairs"):
        download_corpus(str(tmp_path / "c.zip"), tmp_path / "data", None, progress=False)


def test_the_installed_corpus_is_readable_as_the_umask_allows(tmp_path):
    """The extraction's staging directory (mkdtemp: 0700) must not make the corpus owner-only on a shared disk."""
    (tmp_path / "c.zip").write_bytes(make_zip({"fra-eng/fra.txt": toy_corpus_text()}))
    previous = os.umask(0o022)
    try:
        path = download_corpus(str(tmp_path / "c.zip"), tmp_path / "data", None, progress=False)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    assert stat.S_IMODE(path.stat().st_mode) & 0o044 == 0o044


def test_an_unreachable_server_says_nothing_came_and_how_to_go_offline(tmp_path):
    import socket

    with socket.socket() as s:  # a loopback port that nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NMTError, match=r"^download failed for http://127\.0\.0\.1:\d+/fra-eng\.zip: .*\(nothing "
                                       r"downloaded; without network access, give a local copy instead: a path or a "
                                       r"file:// URL\)$"):
        download_corpus(f"http://127.0.0.1:{port}/fra-eng.zip", tmp_path / "data", None, progress=False)


def test_a_corpus_url_of_ones_own_is_downloaded_once_checked_for_changes_and_used_offline(tmp_path):
    """Before, every command that resolved the corpus (prepare, train, a resume, evaluate) downloaded the whole
    file again, and none of them worked offline though the copy was on disk."""
    from nmt.data.download import fetch_file

    root, codes = tmp_path / "www", []
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "pairs.tsv").write_text("hello\tbonjour\n")
    (root / "b" / "pairs.tsv").write_text("cat\tchat\n")

    class Counting(http.server.SimpleHTTPRequestHandler):  # answers If-Modified-Since with 304 when unchanged
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_request(self, code="-", size="-"):
            codes.append(int(code))

    cache, warned = tmp_path / "data" / ".downloads", []
    with serving(Counting) as base:
        url = f"{base}/a/pairs.tsv"
        first = fetch_file(url, cache, progress=False)
        assert first.read_text() == "hello\tbonjour\n" and codes == [200]
        assert fetch_file(url, cache, progress=False) == first and codes == [200, 304]  # unchanged: not sent again
        (root / "a" / "pairs.tsv").write_text("hello\tsalut\n")
        later = os.stat(root / "a" / "pairs.tsv").st_mtime + 10
        os.utime(root / "a" / "pairs.tsv", (later, later))
        assert fetch_file(url, cache, progress=False).read_text() == "hello\tsalut\n" and codes[-1] == 200
        # Another URL ending in the same file name is a copy of its own.
        other = fetch_file(f"{base}/b/pairs.tsv", cache, progress=False)
        assert other != first and other.read_text() == "cat\tchat\n" and first.read_text() == "hello\tsalut\n"
    # The server is gone: the copy is used, and a warning says so.
    assert fetch_file(url, cache, progress=False, warn=warned.append).read_text() == "hello\tsalut\n"
    assert len(warned) == 1 and warned[0].startswith(f"could not ask {url} whether it changed (")
    assert "): using the copy downloaded 20" in warned[0] and warned[0].endswith(" UTC")
    # A URL never downloaded still fails offline, saying what to do.
    with pytest.raises(NMTError, match="nothing downloaded; without network access"):
        fetch_file(f"{base}/c/pairs.tsv", cache, progress=False, warn=warned.append)


def test_ranks_fetching_one_url_at_once_share_one_download(tmp_path):
    """torchrun's ranks resolve the corpus at the same moment: one downloads, the others wait and take its copy
    (here a server without validators, so each asks again; before the lock they wrote one .part together)."""
    from nmt.data.download import fetch_file

    blob = b"hello\tbonjour\n" * 4000

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            for start in range(0, len(blob), 8000):
                self.wfile.write(blob[start:start + 8000])
                self.wfile.flush()
                threading.Event().wait(0.02)

        def log_message(self, *args):
            pass

    cache, results, errors = tmp_path / ".downloads", [], []

    def fetch():
        try:
            results.append(fetch_file(url, cache, progress=False))
        except Exception as err:  # noqa: BLE001 - the test reports whatever a rank met
            errors.append(err)

    with serving(Slow) as base:
        url = f"{base}/pairs.tsv"
        ranks = [threading.Thread(target=fetch) for _ in range(3)]
        for rank in ranks:
            rank.start()
        for rank in ranks:
            rank.join(timeout=60)
    assert errors == [] and len(results) == 3 and len(set(results)) == 1
    assert results[0].read_bytes() == blob and not list(results[0].parent.glob("*.part"))


def test_a_stalled_check_for_a_newer_copy_goes_on_with_the_one_on_disk(range_server, tmp_path, monkeypatch):
    """A server that trickles while a cached corpus is checked is as good as an unreachable one: the copy serves."""
    from nmt.data import download

    handler, url = range_server  # no validators: each call downloads again, as a server without ETag makes it
    handler.blob = b"hello\tbonjour\n" * 200
    cache, warned = tmp_path / ".downloads", []
    first = download.fetch_file(url, cache, progress=False)
    handler.trickle = True
    monkeypatch.setattr(download, "STALL_WINDOW_S", 0.5)
    monkeypatch.setattr(download, "STALL_MIN_BYTES", 1000)
    assert download.fetch_file(url, cache, progress=False, warn=warned.append) == first
    assert first.read_bytes() == handler.blob and len(warned) == 1 and "whether it changed (stalled)" in warned[0]


@pytest.mark.parametrize("answer,said", [
    (b"SSH-2.0-OpenSSH_9.6\r\n",  # a port that speaks no HTTP
     "download failed for {url}: no HTTP answer \\(BadStatusLine 'SSH-2.0-OpenSSH_9.6'\\) \\(nothing "),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10,
     "download of {url} incomplete: 10 of 1000 bytes \\(re-run to resume\\)"),
], ids=["not-http", "cut-short"])
def test_a_server_that_answers_no_http_or_hangs_up_mid_body_is_a_download_failure(answer, said, tmp_path):
    """A port that speaks no HTTP raised http.client's BadStatusLine, no OSError: an internal error (exit 1)."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def answer_once():
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                connection.sendall(answer)

        threading.Thread(target=answer_once, daemon=True).start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/fra-eng.zip"
        with pytest.raises(NMTError, match="^" + said.format(url=url)):
            download_corpus(url, tmp_path / "data", None, progress=False)


@pytest.mark.parametrize("setting", ["http_proxy", "HTTP_PROXY"])
def test_a_download_through_a_proxy_that_fails_names_the_proxy(tmp_path, setting):
    """With http_proxy=abc the download failed with "Name or service not known" for a host that resolves. A process
    of its own: urllib reads the proxies once, as its first request opens."""
    environment = {name: value for name, value in os.environ.items() if name.lower() not in ("http_proxy", "no_proxy")}
    environment[setting] = "http://127.0.0.1:9"  # the discard port: nothing listens
    with serving_folder(tmp_path) as base:
        url = f"{base}/fra-eng.zip"
        done = subprocess.run([sys.executable, "-m", "nmt", "download", "--url", url, "--data-dir",
                               str(tmp_path / "data")], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: download failed for {url} through the proxy http://127.0.0.1:9 ({setting}): "
                                  "[Errno 111] Connection refused"), done.stderr


def test_no_proxy_exempts_a_host(monkeypatch):
    from nmt.data.download import proxy_used

    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_used("http://example.org/x.zip") == ""
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    assert proxy_used("http://example.org/x.zip") == " through the proxy http://proxy:3128 (http_proxy)"
    assert proxy_used("https://example.org/x.zip") == ""  # https_proxy unset
    monkeypatch.setenv("no_proxy", "example.org")
    assert proxy_used("http://example.org/x.zip") == ""


def _basic(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class _Guarded(http.server.BaseHTTPRequestHandler):
    """pairs.tsv for alice with the password "s3cr@t" alone; /elsewhere redirects to `redirect_to`. Every request's
    Authorization header is kept in `seen`."""
    seen: list = []
    redirect_to = ""

    def do_GET(self):  # noqa: N802 - http.server's name
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/elsewhere":
            self.send_response(302)
            self.send_header("Location", self.redirect_to)
            self.end_headers()
        elif self.headers.get("Authorization") != _basic("alice", "s3cr@t"):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="corpus"')
            self.end_headers()
        else:
            body = b"hello\tbonjour\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_corpus_behind_a_password_is_fetched_and_the_password_never_shown(tmp_path, monkeypatch):
    """`https://user:token@host/x.tsv`, as wget and curl take it, failed ("Name or service not known": urllib sent
    user:token@host to the resolver), and printed the token in the error."""
    from nmt.data.download import fetch_file

    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    _Guarded.seen = []
    with serving(_Guarded) as base:
        host = base.removeprefix("http://")
        fetched = fetch_file(f"http://alice:s3cr%40t@{host}/pairs.tsv", tmp_path / "cache", progress=False)
        assert fetched.read_text() == "hello\tbonjour\n"
        record = (fetched.parent / "source.json").read_text()
        assert f"http://alice:***@{host}/pairs.tsv" in record and "s3cr" not in record
        with pytest.raises(NMTError) as refused:
            fetch_file(f"http://alice:wrong@{host}/pairs.tsv", tmp_path / "other-cache", progress=False)
    assert str(refused.value) == f"download failed: HTTP 401 for http://alice:***@{host}/pairs.tsv"
    assert _Guarded.seen[0] == ("/pairs.tsv", _basic("alice", "s3cr@t"))


def test_a_password_from_netrc_and_none_sent_on_through_a_redirect(tmp_path, monkeypatch):
    from nmt.data.download import fetch_file

    _Guarded.seen = []
    with serving(_Guarded) as base, serving(_Guarded) as other:
        host = base.removeprefix("http://").split(":")[0]
        (tmp_path / "netrc").write_text(f"machine {host} login alice password s3cr@t\n")
        (tmp_path / "netrc").chmod(0o600)
        monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
        assert fetch_file(f"{base}/pairs.tsv", tmp_path / "cache", progress=False).read_text() == "hello\tbonjour\n"
        # A server that sends the download elsewhere gets the password; where it points does not (curl's rule).
        _Guarded.redirect_to, _Guarded.seen = f"{other.replace('127.0.0.1', 'localhost')}/pairs.tsv", []
        with pytest.raises(NMTError, match="HTTP 401"):
            fetch_file(f"http://alice:s3cr%40t@{base.removeprefix('http://')}/elsewhere", tmp_path / "c2",
                       progress=False)
    assert _Guarded.seen == [("/elsewhere", _basic("alice", "s3cr@t")), ("/pairs.tsv", None)]


def test_a_netrc_that_cannot_be_read_is_named(tmp_path, monkeypatch):
    from nmt.data.download import netrc_authorization

    (tmp_path / "netrc").write_text("machine example.org login alice password x\n")
    (tmp_path / "netrc").chmod(0o600)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert netrc_authorization("example.org") == _basic("alice", "x") and netrc_authorization("other.org") is None
    (tmp_path / "netrc").write_text("machine example.org login alice passwd x\n")  # a token netrc does not know
    with pytest.raises(NMTError, match="^cannot read the netrc file for example.org's password: "):
        netrc_authorization("example.org")


@pytest.mark.skipif(not shutil.which("openssl"), reason="no openssl to make a certificate")
def test_a_certificate_this_machine_does_not_trust_says_how_to_trust_it(tmp_path, monkeypatch):
    """A self-signed server, or a proxy that inspects TLS: the advice was "without network access, give a local
    copy", where the network is there and SSL_CERT_FILE is what helps."""
    import functools
    import ssl

    from nmt.data.download import fetch_file

    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "key.pem"),
                    "-out", str(tmp_path / "cert.pem"), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "pairs.tsv").write_text("hello\tbonjour\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "www"))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}/pairs.tsv"
    try:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(NMTError, match=r"\(a certificate this machine does not trust: a self-signed server, or a "
                                           r"proxy that inspects TLS; name the CA certificate that signs it with "
                                           r"SSL_CERT_FILE=PATH\)$"):
            fetch_file(url, tmp_path / "cache", progress=False)
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
        assert fetch_file(url, tmp_path / "cache", progress=False).read_text() == "hello\tbonjour\n"
    finally:
        server.shutdown()
