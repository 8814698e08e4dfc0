"""`nmt serve`: the API through FastAPI's test client, and the page in a real headless Chromium."""

import contextlib
import dataclasses
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nmt.translator import Translator

pytest.importorskip("fastapi", reason="FastAPI not installed (pip install 'nmt[serve]')")
pytest.importorskip("httpx", reason="httpx (FastAPI's test client) not installed")
from fastapi.testclient import TestClient  # noqa: E402

from nmt.serve import create_app  # noqa: E402
from nmt.serve_scheduler import Limits  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


@pytest.fixture(scope="module")
def translator(toy_transformer_run):
    return Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})


@pytest.fixture(scope="module")
def client(translator):
    with TestClient(create_app(translator, Limits(max_sentences=8, max_chars=200, batch_window_s=0.05))) as c:
        yield c


def test_translate_with_attention_matrices(client, translator):
    response = client.post("/translate", json={"sentences": ["I have two cats.", ""], "beam": 3, "attention": True,
                                               "layer": 0, "head": 1})
    assert response.status_code == 200, response.text
    first, empty = response.json()["translations"]
    assert first["text"] == translator.translate(["I have two cats."], beam_size=3)[0].text
    assert len(first["attention"]) == len(first["target_pieces"])
    assert all(len(row) == len(first["source_pieces"]) and abs(sum(row) - 1) < 1e-3 for row in first["attention"])
    assert empty["text"] == "" and "attention" not in empty


def test_translations_carry_scores_and_n_best_lists_on_request(client, translator):
    response = client.post("/translate", json={"sentences": ["I have two cats.", ""], "beam": 3, "n_best": 3})
    assert response.status_code == 200, response.text
    first, empty = response.json()["translations"]
    expected = translator.translate(["I have two cats."], beam_size=3, n_best=3)[0].hypotheses
    assert [h["text"] for h in first["n_best"]] == [h.text for h in expected] and first["text"] == expected[0].text
    assert [h["score"] for h in first["n_best"]] == [round(h.score, 4) for h in expected]
    assert first["score"] == first["n_best"][0]["score"] and first["log_prob"] == round(expected[0].log_prob, 4)
    assert empty["text"] == "" and empty["score"] is None and empty["n_best"] == []
    plain = client.post("/translate", json={"sentences": ["I have two cats."], "beam": 3}).json()["translations"][0]
    assert "n_best" not in plain and plain["score"] == first["score"]
    refused = client.post("/translate", json={"sentences": ["hi"], "beam": 2, "n_best": 3})
    assert refused.status_code == 400 and "needs a beam of 3 or more" in refused.text


def test_a_source_cut_to_the_input_limit_is_marked(client, translator):
    # A sentence over decode.max_input_tokens came back translated in part, with nothing to say so.
    pieces = len(translator._encode("I have two cats.")[0])
    response = client.post("/translate", json={"sentences": ["I have two cats.", "Go."]})
    assert [t["source_cut"] for t in response.json()["translations"]] == [False, False]
    short = dataclasses.replace(translator.decode, max_input_tokens=pieces)  # room for all but one piece and EOS
    cut = Translator(translator.model, translator.tokenizers, translator.normalizer, short, translator.device)
    with TestClient(create_app(cut, Limits(batch_window_s=0.01))) as strict:
        response = strict.post("/translate", json={"sentences": ["I have two cats.", "Go.", ""]})
        health = strict.get("/health").json()
    assert response.status_code == 200, response.text
    assert [t["source_cut"] for t in response.json()["translations"]] == [True, False, False]
    assert health["sources_cut"] == 1  # the operator's count of them all (the log shows the first few)


def test_health_describes_the_model(client):
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["architecture"] == "transformer"
    assert body["attention_layers"] == 2 and body["attention_heads"] == 2


def test_prefixes_start_their_translations_and_are_checked_like_sentences(client, translator):
    sentences = ["I have two cats.", "She has five keys."]
    response = client.post("/translate", json={"sentences": sentences, "prefixes": ["Nous avons", None]})
    assert response.status_code == 200, response.text
    first, second = (t["text"] for t in response.json()["translations"])
    expected = translator.translate(sentences, prefixes=["Nous avons", None])
    assert first.startswith("Nous avons ") and [first, second] == [t.text for t in expected]
    for prefixes, status, fragment in [(["Nous"], 422, "1 prefix for 2 sentences: one per"),
                                       (["x" * 201, None], 413, "prefix 0 is longer than 200"),
                                       ([None, "a\nb"], 422, "one prefix per list item")]:
        refused = client.post("/translate", json={"sentences": sentences, "prefixes": prefixes})
        assert refused.status_code == status and fragment in refused.text, refused.text

    # A prefix is decoded a step a piece: it is priced with its sentence.
    source_cost = translator.count_pieces(sentences[0])
    with TestClient(create_app(translator, Limits(max_request_cost=2 * source_cost, batch_window_s=0.01))) as strict:
        alone = strict.post("/translate", json={"sentences": sentences[:1], "beam": 2})
        prefixed = strict.post("/translate", json={"sentences": sentences[:1], "beam": 2, "prefixes": ["Nous avons"]})
    assert alone.status_code == 200 and prefixed.status_code == 413 and "too costly" in prefixed.text


def test_constraints_are_held_checked_like_sentences_and_priced(client, translator):
    sentences = ["I have two cats.", "She has five keys."]
    asked = {"sentences": sentences, "beam": 3, "constraints": [["livres"], []]}
    response = client.post("/translate", json=asked)
    assert response.status_code == 200, response.text
    first, second = (t["text"] for t in response.json()["translations"])
    expected = translator.translate(sentences, beam_size=3, constraints=[["livres"], []])
    assert "livres" in first and [first, second] == [t.text for t in expected]
    assert second == translator.translate(sentences[1:], beam_size=3)[0].text
    batches = client.get("/health").json()["batches_run"]
    for constraints, beam, status, fragment in [
            ([["livres"]], 3, 422, "constraints for 1 sentences but 2 sentences"),
            ([["x" * 201], []], 3, 413, "constraint 0 is longer than 200"),
            ([["a\nb"], []], 3, 422, "one constraint per list item"),
            ([["livres"] * 17, []], 3, 422, "at most 16 constraints a sentence"),
            ([[" "], []], 3, 400, "constraint ' ' has no text"),
            ([["livres"], []], 1, 400, "constraints need beam search")]:
        refused = client.post("/translate", json={**asked, "constraints": constraints, "beam": beam})
        assert refused.status_code == status and fragment in refused.text, refused.text
    assert client.get("/health").json()["batches_run"] == batches  # refused before the queue

    # A phrase lengthens the search by its pieces: it is priced with its sentence.
    source_cost = translator.count_pieces(sentences[0])
    with TestClient(create_app(translator, Limits(max_request_cost=2 * source_cost, batch_window_s=0.01))) as strict:
        alone = strict.post("/translate", json={"sentences": sentences[:1], "beam": 2})
        held = strict.post("/translate", json={"sentences": sentences[:1], "beam": 2,
                                               "constraints": [["Nous avons cinq livres"]]})
    assert alone.status_code == 200 and held.status_code == 413 and "too costly" in held.text


def test_a_prefix_the_model_cannot_hold_is_refused_by_its_place_before_any_decoding(translator):
    from tests_helpers import text_of_pieces

    too_long = text_of_pieces(translator, 1023)  # max_positions 1024 holds the start token, 1022 pieces and EOS
    with TestClient(create_app(translator, Limits(max_chars=2000, batch_window_s=0.01))) as client:
        refused = client.post("/translate", json={"sentences": ["Go.", "Hi.", "Run!"],
                                                  "prefixes": [None, "Va", too_long]})
        batches = client.get("/health").json()["batches_run"]
    assert refused.status_code == 400, refused.text
    assert refused.json()["detail"] == ("prefix 2 is 1023 pieces; this model holds a target of at most 1022 "
                                        "(model.max_positions 1024, with the start token and EOS)")
    assert batches == 0  # refused as the request came: no batch (of other clients' requests too) failed on it


def test_an_ensemble_serves_like_one_model(toy_transformer_run, translator):
    # best.pt and last.pt hold the same weights here: the ensemble must translate as the model alone does.
    twins = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"},
                                ensemble=[toy_transformer_run / "checkpoints" / "last.pt"])
    with TestClient(create_app(twins, Limits(batch_window_s=0.01))) as client:
        health = client.get("/health").json()
        assert health["architecture"] == "transformer+transformer" and len(health["ensemble"]) == 2
        assert health["attention_layers"] == 2 and health["attention_heads"] == 2
        response = client.post("/translate", json={"sentences": ["I have two cats."], "beam": 3, "attention": True})
    assert response.status_code == 200, response.text
    served = response.json()["translations"][0]
    assert served["text"] == translator.translate(["I have two cats."], beam_size=3)[0].text
    assert all(abs(sum(row) - 1) < 1e-3 for row in served["attention"])  # the members' mean attention


@pytest.mark.parametrize("payload,status,fragment", [
    ({}, 422, "sentences"),
    ({"sentences": []}, 422, "at least 1"),
    ({"sentences": ["a"] * 9}, 422, "at most 8"),
    ({"sentences": ["x" * 201]}, 413, "longer than 200"),
    ({"sentences": ["a\nb"]}, 422, "line breaks"),
    ({"sentences": ["hi"], "beam": 0}, 422, "greater than or equal to 1"),
    ({"sentences": ["hi"], "beam": 99}, 422, "less than or equal to 16"),
    ({"sentences": ["hi"], "attention": True, "layer": 7}, 400, "this model has 2 attention layers with 2 heads each;"),
    ({"sentences": ["hi"], "attention": True, "head": 5}, 400, "this model has 2 attention layers with 2 heads each;"),
    ({"sentences": ["hi"], "layer": 0}, 422, "which attention"),  # not ignored
    ({"sentences": ["hi"], "attention": False, "head": 0}, 422, "which attention"),
    ({"sentences": "hi"}, 422, "list"),
    ({"sentences": [3]}, 422, "string"),
    ({"sentences": ["hi"], "beam_size": 1}, 422, "Extra inputs are not permitted"),  # a typo is not ignored
    ({"sentences": ["hi"], "patient_stop": False}, 422, "Extra inputs are not permitted"),  # nor what it lacks
    ({"sentences": ["hi"], "beam": True}, 422, "valid integer"),
    ({"sentences": ["hi"], "beam": "5"}, 422, "valid integer"),
    ({"sentences": ["hi"], "attention": "yes"}, 422, "valid boolean"),
])
def test_bad_requests_are_4xx_with_a_reason(client, payload, status, fragment):
    response = client.post("/translate", json=payload)
    assert response.status_code == status, response.text
    assert fragment in response.text


@pytest.mark.parametrize("field", ["length_penalty", "sample_topp", "temperature"])
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_float_that_is_not_finite_is_named_so(client, field, value):
    # Python's JSON reader takes these literals; a range check alone called NaN "above the maximum".
    body = f'{{"sentences": ["hi"], "{field}": {value}}}'.encode()
    response = client.post("/translate", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert "finite number" in response.text, response.text


def test_not_json_is_a_4xx(client):
    response = client.post("/translate", content=b"\xff\xfe not json", headers={"Content-Type": "application/json"})
    assert 400 <= response.status_code < 500


def test_twenty_concurrent_requests_are_batched(client, translator):
    sentences = [f"We have {n} keys." for n in ("one", "two", "three", "four", "five")] * 4
    expected = {s: r.text for s, r in zip(sentences, translator.translate(sentences, beam_size=2))}
    batcher = client.app.state.scheduler
    before = batcher.batches_run
    with ThreadPoolExecutor(max_workers=20) as pool:
        responses = list(pool.map(lambda s: client.post("/translate", json={"sentences": [s], "beam": 2}),
                                  sentences))
    assert all(r.status_code == 200 for r in responses)
    assert [r.json()["translations"][0]["text"] for r in responses] == [expected[s] for s in sentences]
    assert batcher.batches_run - before < 20, "concurrent requests should share decoding batches"


def test_page_is_served(client):
    page = client.get("/")
    assert page.status_code == 200 and "<canvas id=\"heatmap\"" in page.text


# --- the page in a real browser --------------------------------------------------------------------------------

def _chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextlib.contextmanager
def serving(engine):
    """The app on a free local port (uvicorn on a thread): its URL."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(engine), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def live_server(translator):
    with serving(translator) as url:
        yield url


@contextlib.contextmanager
def headless_chromium():
    from selenium.webdriver import Chrome, ChromeOptions
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = _chromium()
    options = ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1000,800"):
        options.add_argument(flag)
    driver = Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no chromium + chromedriver (apt-get install chromium chromium-driver)")
def test_page_translates_and_draws_the_heatmap_in_chromium(live_server, translator):
    pytest.importorskip("selenium", reason="selenium not installed")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with headless_chromium() as driver:
        driver.get(live_server + "/")
        WebDriverWait(driver, 20).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#layer option")) == 2)
        box = driver.find_element(By.ID, "source")
        assert (box.get_attribute("lang"), driver.find_element(By.ID, "output").get_attribute("lang")) == ("en", "fr")
        assert box.get_attribute("value") == "I'm home."  # the English example, for an English source
        box.clear()
        box.send_keys("I have two cats.")
        driver.find_element(By.ID, "translate").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "output").text.strip() != "")
        beam = translator.decode.beam_size
        expected = translator.translate(["I have two cats."], beam_size=beam, n_best=min(3, beam))[0]
        assert driver.find_element(By.ID, "output").text == expected.text
        runners_up = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#alternatives li")]
        assert len(runners_up) >= 1 and runners_up == [h.text for h in expected.hypotheses[1:]]
        canvas = driver.find_element(By.ID, "heatmap")
        assert int(canvas.get_attribute("data-rows")) >= 2 and int(canvas.get_attribute("data-cols")) >= 4
        assert canvas.size["width"] > 150 and canvas.size["height"] > 100
        # Some cells must have been painted in the heatmap's colours, not left white.
        painted = driver.execute_script(
            "const c = document.getElementById('heatmap'), d = c.getContext('2d')"
            ".getImageData(110, 90, c.width - 120, c.height - 100).data; let n = 0;"
            "for (let i = 0; i < d.length; i += 4) if (d[i] < 240 || d[i + 1] < 240) n++; return n;")
        assert painted > 500
        # Interactive translation: a start typed in the target language, which the model continues.
        driver.find_element(By.ID, "prefix").send_keys("Nous avons")
        driver.find_element(By.ID, "translate").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "output").text.startswith("Nous avons"))
        continued = translator.translate(["I have two cats."], beam_size=beam, prefixes=["Nous avons"])[0]
        assert driver.find_element(By.ID, "output").text == continued.text
        assert driver.find_element(By.ID, "prefix").get_attribute("lang") == "fr"
        # Lexical constraints: words the translation must hold, typed in the target language.
        driver.find_element(By.ID, "prefix").clear()
        driver.find_element(By.ID, "constraints").send_keys("livres ; Elle")
        driver.find_element(By.ID, "translate").click()
        held = translator.translate(["I have two cats."], beam_size=beam, constraints=[["livres", "Elle"]])[0]
        assert "livres" in held.text and "Elle" in held.text
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "output").text == held.text)
        assert driver.find_element(By.ID, "constraints").get_attribute("lang") == "fr"
        driver.find_element(By.ID, "constraints").clear()
        # A sentence past the model's input limit: the page says that only its start was translated.
        long = "I have two cats. " * 58  # under the server's 1,000 characters, over 255 pieces
        assert len(translator._encode(long)[0]) == translator.decode.max_input_tokens - 1 and len(long) < 1000
        assert driver.find_element(By.ID, "status").text == ""
        box.clear()
        box.send_keys(long)
        driver.find_element(By.ID, "translate").click()
        WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "status").text.startswith("only the start"))
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "serve-page.png"))
        assert driver.find_element(By.ID, "heatmap-hint").is_displayed()
    assert (ARTIFACTS / "serve-page.png").stat().st_size > 5000


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no chromium + chromedriver (apt-get install chromium chromium-driver)")
def test_the_page_of_a_ctranslate2_server_offers_only_what_it_can_do(translator, tmp_path):
    """CTranslate2 has no constrained search and returns no attention here: no box for constraints, no heatmap and
    no caption for one, no layer or head to pick; the translation is the export's own."""
    pytest.importorskip("selenium", reason="selenium not installed")
    pytest.importorskip("ctranslate2", reason="CTranslate2 not installed (pip install 'nmt[export]')")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from nmt.ct2_engine import CTranslate2Engine
    from nmt.export import export_ctranslate2

    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    engine = CTranslate2Engine(tmp_path / "ct2")
    expected = engine.translate(["I have two cats."])[0].text
    with serving(engine) as url, headless_chromium() as driver:
        driver.get(url + "/")
        WebDriverWait(driver, 20).until(lambda d: "→" in d.find_element(By.ID, "title").text)  # /health was read
        hidden = [name for name in ("constraints", "heatmap", "heatmap-hint", "layer", "head")
                  if not driver.find_element(By.ID, name).is_displayed()]
        assert hidden == ["constraints", "heatmap", "heatmap-hint", "layer", "head"]
        assert driver.find_element(By.ID, "prefix").is_displayed()  # a prefix it can continue
        box = driver.find_element(By.ID, "source")
        box.clear()
        box.send_keys("I have two cats.")
        driver.find_element(By.ID, "translate").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "output").text.strip() != "")
        assert driver.find_element(By.ID, "output").text == expected
        assert driver.find_element(By.ID, "error").text == ""


def test_a_request_brings_decode_settings_of_its_own(client, translator):
    sentence = "I have two cats."
    sampled = client.post("/translate", json={"sentences": [sentence] * 2, "sample_topk": 0, "temperature": 1.5,
                                              "seed": 4, "n_best": 3})
    assert sampled.status_code == 200, sampled.text
    assert sampled.json()["beam"] == 1  # sampling takes beam 1 unless the request names one
    expected = translator.translate([sentence] * 2, n_best=3, decode=dataclasses.replace(
        translator.decode, beam_size=1, sampling_topk=0, sampling_temperature=1.5, sampling_seed=4))
    assert [[h["text"] for h in t["n_best"]] for t in sampled.json()["translations"]] == \
        [[h.text for h in t.hypotheses] for t in expected]
    banned = client.post("/translate", json={"sentences": [sentence], "beam": 3, "no_repeat_ngram": 1})
    assert banned.status_code == 200, banned.text
    words = banned.json()["translations"][0]["text"]
    assert words == translator.translate([sentence], decode=dataclasses.replace(
        translator.decode, beam_size=3, no_repeat_ngram_size=1))[0].text
    for payload, status, fragment in [({"sample_topk": 5, "beam": 4}, 400, "it takes beam 1, not 4"),
                                      ({"temperature": 0}, 422, "greater than 0"),
                                      ({"length_penalty": "1"}, 422, "length_penalty"),
                                      ({"seed": 3}, 400, "seed seeds the sampler"),
                                      # top-k 1 is no sampling: the top-p was decoded past by beam search
                                      ({"sample_topk": 1, "sample_topp": 0.5}, 400, "only applies when sampling")]:
        refused = client.post("/translate", json={"sentences": [sentence], **payload})
        assert refused.status_code == status and fragment in refused.text, refused.text


def test_draws_are_priced_as_rows(translator):
    # Sampling n draws decodes n rows per sentence, as a beam of n does: a request is priced by them.
    cost = translator.count_pieces("I have two cats.")
    with TestClient(create_app(translator, Limits(max_request_cost=4 * cost, batch_window_s=0.01))) as strict:
        four = strict.post("/translate", json={"sentences": ["I have two cats."], "sample_topk": 0, "n_best": 4})
        eight = strict.post("/translate", json={"sentences": ["I have two cats."], "sample_topk": 0, "n_best": 8})
    assert four.status_code == 200 and eight.status_code == 413, (four.text, eight.text)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_the_command_serves_translations_and_stops_on_sigterm(toy_transformer_run, translator):
    # The test client above skips `nmt serve` itself: a stdout wrapper without isatty once failed uvicorn's logging
    # setup ("internal error ValueError: Unable to configure formatter 'default'") with every API test passing.
    import json
    import signal
    import subprocess
    import sys
    import urllib.request

    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "nmt", "serve", "--run", str(toy_transformer_run), "--port",
                                str(port), "--set", "decode.precision=fp32"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.communicate()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as health:
                    assert json.load(health)["status"] == "ok"
                break
            except OSError:
                assert time.monotonic() < deadline, "nmt serve did not answer in 120 s"
                time.sleep(0.2)
        asked = urllib.request.Request(f"http://127.0.0.1:{port}/translate", method="POST",
                                       data=json.dumps({"sentences": ["I have two cats."]}).encode(),
                                       headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(asked, timeout=60) as answer:
            served = json.load(answer)["translations"][0]["text"]
        assert served == translator.translate(["I have two cats."])[0].text
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert "error" not in stderr and "Traceback" not in stderr, stderr
    assert f"on http://127.0.0.1:{port}/" in stdout + stderr


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_an_ipv6_host_in_brackets_is_served_as_urls_write_it():
    """`--host [::1]` (as the server's own line and every URL write it) was "not an address of this machine"."""
    from nmt.serve_hosts import check_bind_address, host_address, server_url

    assert host_address("[::1]") == "::1" and host_address("::1") == "::1"
    assert host_address("localhost") == "localhost" and host_address("[fe80::1%eth0]") == "fe80::1%eth0"
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback on this machine")
    with check_bind_address(host_address("[::1]"), 0) as listener:
        assert listener.family == socket.AF_INET6 and listener.getsockname()[0] == "::1"
        assert server_url(host_address("[::1]"), 8000) == "http://[::1]:8000/"


def test_a_port_below_1024_for_a_user_says_whose_it_is(monkeypatch):
    """`nmt serve --port 80` as a user said "Permission denied" alone. Root may bind it, so the refusal is made."""
    import errno

    import nmt.serve_hosts as serve

    class Unprivileged(socket.socket):
        def bind(self, address):
            if 0 < address[1] < 1024:
                raise PermissionError(errno.EACCES, "Permission denied")
            return super().bind(address)

    monkeypatch.setattr(serve.socket, "socket", Unprivileged)
    with pytest.raises(serve.NMTError, match=r"^cannot listen on 127\.0\.0\.1:80: Permission denied \(ports below 1024 "
                                             r"are root's: --port 8080\)$"):
        serve.check_bind_address("127.0.0.1", 80)
    serve.check_bind_address("127.0.0.1", 0).close()
