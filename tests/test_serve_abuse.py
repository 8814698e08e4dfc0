"""`nmt serve` under abuse: each row is a request a careless or hostile client sends. Every case asserts the status
and the body's shape, that `/health` still answers afterwards, and that good requests sent at the same time succeed.
Then: fairness (a small request overtakes a big one), Host checks, and the CLI's refusals (busy port, bad address)."""

import json
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from nmt.translator import Translator
from tests_helpers import nmt

pytest.importorskip("fastapi", reason="FastAPI not installed (pip install 'nmt[serve]')")
from fastapi.testclient import TestClient  # noqa: E402

from nmt.errors import NMTError  # noqa: E402
from nmt.serve import create_app  # noqa: E402
from nmt.serve_hosts import allowed_host_name, allowed_hosts, exposure_notice, host_of, server_url  # noqa: E402
from nmt.serve_scheduler import Limits, chunk_sentences  # noqa: E402

GOOD = {"sentences": ["I have two cats."], "beam": 2}


@pytest.fixture(scope="module")
def translator(toy_transformer_run):
    return Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})


@pytest.fixture(scope="module")
def client(translator):
    with TestClient(create_app(translator, Limits(batch_window_s=0.02))) as c:
        yield c


def _raw(client, body: str):
    return client.post("/translate", content=body.encode("utf-8"), headers={"Content-Type": "application/json"})


def _translated(response, count: int) -> bool:
    body = response.json()
    return (response.status_code == 200 and len(body["translations"]) == count
            and all(isinstance(t["text"], str) for t in body["translations"]))


def _rejected(status: int, fragment: str):
    def check(response) -> bool:
        text = response.text
        return response.status_code == status and fragment in text and "detail" in response.json()
    return check


# (id, raw JSON body, check of the response)
CASES = [
    ("lone-surrogate", '{"sentences": ["hi \\ud800 ."]}', lambda r: _translated(r, 1)),
    ("low-surrogate-first", '{"sentences": ["\\udc00", "i am home ."]}', lambda r: _translated(r, 2)),
    ("nul-and-controls", '{"sentences": ["i am\\u0000 home \\u0007."]}', lambda r: _translated(r, 1)),
    ("non-characters", '{"sentences": ["\\ufffe \\uffff \\ufdd0 we have keys ."]}', lambda r: _translated(r, 1)),
    ("only-control-chars", '{"sentences": ["\\u0000\\u0001"]}', lambda r: _translated(r, 1)),
    ("beam-huge-float", '{"sentences": ["hi"], "beam": 1e400}', _rejected(422, "beam")),
    ("beam-nan", '{"sentences": ["hi"], "beam": NaN}', _rejected(422, "beam")),
    ("beam-infinity", '{"sentences": ["hi"], "beam": -Infinity}', _rejected(422, "beam")),
    ("layer-inf", '{"sentences": ["hi"], "attention": true, "layer": Infinity}', _rejected(422, "layer")),
    ("head-nan", '{"sentences": ["hi"], "attention": true, "head": NaN}', _rejected(422, "head")),
    ("beam-string", '{"sentences": ["hi"], "beam": "five"}', _rejected(422, "beam")),
    ("too-costly", json.dumps({"sentences": ["we have " * 120] * 64, "beam": 16}), _rejected(413, "too costly")),
    ("too-long", json.dumps({"sentences": ["x" * 1001]}), _rejected(413, "longer than 1000")),
    ("too-many", json.dumps({"sentences": ["a"] * 65}), _rejected(422, "sentences")),
    ("line-break", json.dumps({"sentences": ["a\rb"]}), _rejected(422, "line breaks")),
    ("bad-layer", json.dumps({"sentences": ["a"], "attention": True, "layer": 9}), _rejected(400, "layer")),
    ("not-an-object", '[1, 2, 3]', _rejected(422, "detail")),
    ("truncated-json", '{"sentences": ["a"', _rejected(422, "detail")),
    ("body-of-2-mb", json.dumps({"sentences": ["a" * 1000] * 2000}), _rejected(413, "request body over 1,048,576")),
]


@pytest.mark.parametrize("body,check", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_abusive_request_fails_alone(client, translator, body, check):
    expected = translator.translate(GOOD["sentences"], beam_size=2)[0].text
    with ThreadPoolExecutor(max_workers=13) as pool:
        good = [pool.submit(client.post, "/translate", json=GOOD) for _ in range(12)]
        bad = pool.submit(_raw, client, body)
        responses = [f.result() for f in good]
        response = bad.result()
    assert check(response), (response.status_code, response.text)
    assert all(r.status_code == 200 and r.json()["translations"][0]["text"] == expected for r in responses)
    assert client.get("/health").json()["status"] == "ok"


def test_a_body_past_the_limit_is_refused_declared_or_streamed_and_one_within_it_is_served(translator):
    limits = Limits(max_body_bytes=2000)
    within = json.dumps({"sentences": ["I have two cats." + " " * 900] * 2}).encode()
    past = json.dumps({"sentences": ["I have two cats." + " " * 1000] * 2}).encode()
    assert len(within) <= 2000 < len(past)

    def streamed(body: bytes):  # no Content-Length: the limit counts the chunks as they come
        for start in range(0, len(body), 300):
            yield body[start:start + 300]

    headers = {"Content-Type": "application/json"}
    with TestClient(create_app(translator, limits)) as client:
        for send in (lambda body: body, streamed):
            served = client.post("/translate", content=send(within), headers=headers)
            assert _translated(served, 2), served.text
            refused = client.post("/translate", content=send(past), headers=headers)
            assert refused.status_code == 413 and refused.json() == {"detail": "request body over 2,000 bytes"}
        assert client.get("/health").json()["limits"]["max_body_bytes"] == 2000


def test_one_failing_chunk_does_not_fail_the_requests_decoded_with_it(translator):
    """An engine error (a bug, not bad input) fails its own request with a 500; the batch's others succeed."""

    class Fragile:
        def __init__(self, engine):
            self.engine = engine

        def __getattr__(self, name):
            return getattr(self.engine, name)

        def translate(self, sentences, beam_size=None, attention=None, n_best=1, cancelled=None, prefixes=None,
                      decode=None, constraints=None):
            if any("boom" in s for s in sentences):
                mixed.append(len(sentences) > 1)
                raise RuntimeError("engine failure")
            return self.engine.translate(sentences, beam_size, attention, n_best, cancelled, decode=decode)

    mixed = []
    with TestClient(create_app(Fragile(translator), Limits(batch_window_s=0.5)),
                    raise_server_exceptions=False) as client:
        with ThreadPoolExecutor(max_workers=50) as pool:
            good = [pool.submit(client.post, "/translate", json=GOOD) for _ in range(49)]
            bad = pool.submit(client.post, "/translate", json={"sentences": ["boom"], "beam": 2})
            assert bad.result().status_code == 500
            assert [f.result().status_code for f in good] == [200] * 49
        assert any(mixed), "the failing sentence should have been decoded together with good ones first"
        assert client.get("/health").status_code == 200


@pytest.mark.slow
def test_a_small_request_overtakes_a_big_one(translator):
    """Round-robin over chunks: a one-sentence request sent while a 64-sentence one decodes finishes first."""
    limits = Limits(max_request_cost=10**6, max_chunk_cost=40, batch_window_s=0.0)
    big = {"sentences": [f"We have {n} keys and {n} cats and {n} dogs." for n in ("two", "five", "nine", "ten")] * 16,
           "beam": 4}
    finished = {}
    with TestClient(create_app(translator, limits)) as client:
        def send(name, payload, delay):
            time.sleep(delay)
            response = client.post("/translate", json=payload)
            finished[name] = time.perf_counter()
            assert response.status_code == 200

        threads = [threading.Thread(target=send, args=("big", big, 0.0)),
                   threading.Thread(target=send, args=("small", GOOD, 0.2))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert finished["small"] < finished["big"]


def test_a_request_past_the_backlog_limit_is_503_with_retry_after_then_served_once_the_queue_drains(translator):
    limits = Limits(max_request_cost=10**6, max_chunk_cost=40, batch_window_s=0.0, max_backlog_s=1e-6)
    big = {"sentences": [f"We have {n} keys and {n} cats and {n} dogs." for n in ("two", "five", "nine", "ten")] * 4,
           "beam": 4}  # 16 chunks of one sentence: decoded one per batch, while the rest wait
    with TestClient(create_app(translator, limits)) as client:
        assert client.post("/translate", json=GOOD).status_code == 200  # an empty queue takes anything
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(client.post, "/translate", json=big)
            deadline = time.time() + 10
            while client.get("/health").json()["backlog_s"] == 0 and not pending.done() and time.time() < deadline:
                time.sleep(0.01)
            refused = client.post("/translate", json=GOOD)
            assert refused.status_code == 503, refused.text
            assert refused.json()["detail"].startswith("server busy: ") and int(refused.headers["retry-after"]) >= 1
            assert len(pending.result().json()["translations"]) == 16  # the queued request is unharmed
        assert client.get("/health").json()["backlog_s"] == 0
        assert _translated(client.post("/translate", json=GOOD), 1)


@pytest.mark.slow
def test_a_request_whose_client_hangs_up_leaves_the_queue_and_stops_decoding(translator):
    """Through uvicorn with the loopback Host check, as `nmt serve` runs. A client that sends 20 one-sentence chunks
    and hangs up 0.5 s later gets a few decoded, not all 20; one that sends a single long chunk and hangs up stops
    its decoding part way (at the engine's next step); the server goes on serving."""
    import uvicorn

    from nmt.search import SearchCancelled

    calls, stopped = [], []

    class Slow:  # decoding in steps of 0.05 s that ask `cancelled`, as the search does
        def __getattr__(self, name):
            return getattr(translator, name)

        def translate(self, sentences, beam_size=None, attention=None, n_best=1, cancelled=None, prefixes=None,
                      decode=None, constraints=None):
            calls.append(len(sentences))
            for step in range(100 if "long" in sentences[0] else 4):
                if cancelled is not None and cancelled():
                    stopped.append(step)
                    raise SearchCancelled()
                time.sleep(0.05)
            return translator.translate(sentences, beam_size, attention, n_best, decode=decode)

    limits = Limits(max_request_cost=10**6, max_chunk_cost=40, batch_window_s=0.0)
    app = create_app(Slow(), limits, hosts=allowed_hosts("127.0.0.1", []))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def send_and_hang_up(sentences: list[str]) -> None:
        body = json.dumps({"sentences": sentences, "beam": 4}).encode()
        with socket.create_connection(("127.0.0.1", port)) as impatient:
            impatient.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            time.sleep(0.5)
        time.sleep(1.5)  # ample time for the poll (0.25 s) and the step then decoding to finish

    try:
        deadline = time.time() + 30
        while not server.started and time.time() < deadline:
            time.sleep(0.05)
        send_and_hang_up(["We have two keys and five cats."] * 20)  # 20 chunks of one sentence
        decoded = len(calls)
        time.sleep(1.0)
        assert 1 <= decoded <= 8 and len(calls) == decoded, f"{len(calls)} of 20 chunks decoded for a gone client"
        stopped_before = len(stopped)  # the chunk decoding when the first client went may have stopped too
        send_and_hang_up(["We have a long list of keys."])  # one chunk of 100 steps (5 s)
        assert len(calls) == decoded + 1 and len(stopped) == stopped_before + 1 and stopped[-1] < 40, stopped
        import httpx

        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.get("/health").json()["requests_abandoned"] == 2
            assert _translated(client.post("/translate", json=GOOD), 1)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_chunks_respect_the_cost_and_keep_every_sentence():
    sentences = [f"s{i}" for i in range(7)]
    chunks = chunk_sentences(sentences, [5, 5, 5, 50, 1, 1, 1], max_chunk_cost=10)
    assert [c[1] for c in chunks] == [["s0", "s1"], ["s2"], ["s3"], ["s4", "s5", "s6"]]
    assert [c[0] for c in chunks] == [0, 2, 3, 4]


def test_the_url_a_server_prints_can_be_opened():
    assert server_url("127.0.0.1", 8000) == "http://127.0.0.1:8000/"
    assert server_url("localhost", 8000) == "http://localhost:8000/"
    assert server_url("::1", 8799) == "http://[::1]:8799/"  # printed as http://::1:8799/, which no browser opens
    assert server_url("fe80::1%eth0", 80) == "http://[fe80::1%25eth0]:80/"


def test_binding_every_interface_says_so():
    # `--host 0.0.0.0` exposed the server to the network without a word, and named 0.0.0.0 as the page's address.
    for host in ("0.0.0.0", "::"):
        assert exposure_notice(host, 8000).startswith("listening on every interface: any machine that reaches")
        assert exposure_notice(host, 8000).endswith("open http://127.0.0.1:8000/ here")
    assert all(exposure_notice(host, 8000) is None for host in ("127.0.0.1", "::1", "localhost", "10.1.2.3"))


def test_host_header_is_checked_on_loopback(translator):
    assert host_of("[::1]:8000") == "::1" and host_of("LocalHost:80") == "localhost" and host_of("evil.example") \
        == "evil.example"
    assert allowed_hosts("0.0.0.0", []) is None and allowed_hosts("0.0.0.0", ["mt.example"]) == {"mt.example"}
    hosts = allowed_hosts("127.0.0.1", ["mt.internal"])
    with TestClient(create_app(translator, hosts=hosts)) as client:
        for host, status in (("evil.example", 400), ("evil.example:8000", 400), ("127.0.0.1:8000", 200),
                             ("localhost", 200), ("[::1]:8000", 200), ("mt.internal:8000", 200)):
            response = client.get("/health", headers={"Host": host})
            assert response.status_code == status, (host, response.text)
        refused = client.post("/translate", json=GOOD, headers={"Host": "evil.example"})
        assert refused.status_code == 400 and "--allow-host evil.example" in refused.json()["detail"]


def test_allowed_hosts_are_named_as_a_host_header_names_them(translator):
    """`--allow-host mt.example:8000` and `--allow-host [::1]` never matched (a Host header's port and brackets are
    dropped before the check), so every request was refused; a URL or a space is no host name at all."""
    assert [allowed_host_name(name) for name in ("MT.example:8000", "[::1]", "[fe80::1]:80", "mt.example")] == [
        "mt.example", "::1", "fe80::1", "mt.example"]
    for name, said in (("http://mt.example", "is a URL: name its host alone (mt.example)"),
                       ("mt example", "is no host name"), ("", "is no host name"),
                       ("mt.example/api", "is no host name")):
        with pytest.raises(NMTError, match=f"^--allow-host {re.escape(repr(name))} {re.escape(said)}"):
            allowed_host_name(name)
    with TestClient(create_app(translator, hosts=allowed_hosts("127.0.0.1", [allowed_host_name("mt.example:8000")]))
                    ) as client:
        assert client.get("/health", headers={"Host": "mt.example:8000"}).status_code == 200


@pytest.mark.slow
def test_serve_refuses_a_busy_port_and_a_bad_address(toy_transformer_run):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = nmt("serve", "--run", toy_transformer_run, "--port", port, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in result.stderr
    bad = nmt("serve", "--run", toy_transformer_run, "--host", "256.1.1.1", timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: cannot serve on 256.1.1.1"), bad.stderr
