"""`nmt export` to CTranslate2 and translation with the export."""

import dataclasses
import json

import pytest
import sacrebleu
import torch

from nmt.errors import NMTError
from nmt.translator import Translator
from tests_helpers import nmt, text_of_pieces, toy_parallel_corpus

ctranslate2 = pytest.importorskip("ctranslate2", reason="CTranslate2 not installed (pip install 'nmt[export]')")

from nmt.ct2_engine import CTranslate2Engine  # noqa: E402
from nmt.export import export_ctranslate2  # noqa: E402

pytestmark = pytest.mark.slow  # trains and calls the CLI: `make test` runs it, `make test-fast` skips it


def toy_sources(count=200):
    return [line.split("\t")[0] for line in toy_parallel_corpus().splitlines()][:count]


def test_float32_export_decodes_like_nmt(toy_transformer_run, tmp_path):
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    exported = CTranslate2Engine(tmp_path / "ct2")
    sources = toy_sources()
    ours = [r.target_pieces for r in translator.translate(sources, beam_size=1, attention=_pieces_only())]
    theirs = [r.target_pieces for r in exported.translate(sources, beam_size=1)]
    same = sum(a[:-1] == b for a, b in zip(ours, theirs))  # ours end with the </s> label
    assert same >= 0.95 * len(sources), f"{same} of {len(sources)} identical"
    # Both engines mark a source they read only in part (over decode.max_input_tokens), for the server to say.
    limit = len(translator._encode(sources[0])[0])  # room for all its pieces but the last, and EOS
    assert len(translator._encode("Go.")[0]) < limit - 1
    shorter = Translator(translator.model, translator.tokenizers, translator.normalizer,
                         dataclasses.replace(translator.decode, max_input_tokens=limit), translator.device)
    for engine in (shorter, CTranslate2Engine(tmp_path / "ct2", decode_overrides={"max_input_tokens": limit})):
        assert [r.source_cut for r in engine.translate([sources[0], "", "Go."], beam_size=1)] == [True, False, False]


def test_export_ranks_n_best_lists_and_scores_them_as_nmt_does(toy_transformer_run, tmp_path):
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32",
                                                                                          "patient_stop": False})
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    exported = CTranslate2Engine(tmp_path / "ct2")
    sources = toy_sources(40)
    ours = translator.translate(sources, beam_size=4, n_best=3)
    theirs = exported.translate(sources, beam_size=4, n_best=3)
    for source, a, b in zip(sources, ours, theirs):
        assert len(b.hypotheses) == 3 and b.hypotheses[0].text == b.text
        assert [h.score for h in b.hypotheses] == sorted((h.score for h in b.hypotheses), reverse=True)
        # Every hypothesis of either engine has the score and log-probability nmt's own scorer gives its text (two
        # engines' fp32 sums over ~20 pieces: the same to a few parts in 10,000).
        for hypothesis in (*a.hypotheses, *b.hypotheses):
            [rescored] = translator.score([source], [hypothesis.text])
            assert hypothesis.pieces == rescored.pieces
            assert hypothesis.score == pytest.approx(rescored.score, rel=1e-3)
            assert hypothesis.log_prob == pytest.approx(rescored.log_prob, rel=1e-3)
    # The searches differ past the best: nmt stops a sentence once K hypotheses ended (fairseq's rule), CTranslate2
    # by its own, so a list's third entry may differ (a toy model trained beside sentencepiece 0.1.99: 31 of 40
    # lists the same, 39 of 40 best; beside 0.2.3, 40 and 40).
    best = sum(a.text == b.text for a, b in zip(ours, theirs))
    lists = sum([h.text for h in a.hypotheses] == [h.text for h in b.hypotheses] for a, b in zip(ours, theirs))
    assert best >= 0.9 * len(sources) and lists >= 0.5 * len(sources), (best, lists)


def test_export_scores_given_pairs_as_nmt_does(toy_transformer_run, tmp_path):
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    pairs = [line.split("\t") for line in toy_parallel_corpus().splitlines()][:40] + [["", ""]]
    sources, targets = [p[0] for p in pairs], [p[1] for p in pairs]
    ours, theirs = translator.score(sources, targets), CTranslate2Engine(tmp_path / "ct2").score(sources, targets)
    for a, b in zip(ours, theirs):
        assert a.pieces == b.pieces and a.text == b.text
        assert b.log_prob == pytest.approx(a.log_prob, rel=1e-3, abs=1e-3)
        assert b.score == pytest.approx(a.score, rel=1e-3, abs=1e-3)


def test_export_continues_prefixes_as_nmt_does(toy_transformer_run, tmp_path):
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    exported = CTranslate2Engine(tmp_path / "ct2")
    sources = toy_sources(40)
    prefixes = ["Nous avons" if i % 2 else None for i in range(len(sources))]
    ours = translator.translate(sources, beam_size=1, prefixes=prefixes)
    theirs = exported.translate(sources, beam_size=1, prefixes=prefixes)
    assert all(b.text.startswith("Nous avons ") for b, p in zip(theirs, prefixes) if p)
    same = sum(a.text == b.text for a, b in zip(ours, theirs))
    assert same >= 0.9 * len(sources), f"{same} of {len(sources)} identical"
    for a, b in zip(ours, theirs):  # CTranslate2 scores the prefix's pieces too
        if a.text == b.text:
            assert b.hypotheses[0].log_prob == pytest.approx(a.hypotheses[0].log_prob, rel=1e-3, abs=1e-3)


def test_export_refuses_a_prefix_its_positions_cannot_hold_as_nmt_does(toy_transformer_run, tmp_path):
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    exported = CTranslate2Engine(tmp_path / "ct2")
    longest = text_of_pieces(exported, 1022)  # the most a 1024-position table holds with the start token and EOS
    assert exported.translate(["Go."], beam_size=1, prefixes=[longest])[0].text.startswith(longest)
    too_long = longest + longest[-1]
    with pytest.raises(NMTError) as ours:
        translator.translate(["Go."], prefixes=[too_long])
    with pytest.raises(NMTError) as theirs:  # before: CTranslate2 decoded it, then could not score it whole
        exported.translate(["Go."], prefixes=[too_long])
    assert str(theirs.value) == str(ours.value) and "at most 1022" in str(ours.value)
    with pytest.raises(NMTError) as scored:  # and a target to score: its message names it as a target
        exported.score(["Hi.", "Go."], ["Salut !", too_long])
    assert str(scored.value) == str(ours.value).replace("prefix 0", "target 1")
    # Decode settings given past the table are refused by both engines alike, before any sentence.
    past = {"max_len_b": 2000}
    with pytest.raises(NMTError) as ours:
        Translator.from_run(toy_transformer_run, device="cpu", decode_overrides=past)
    with pytest.raises(NMTError) as theirs:
        CTranslate2Engine(tmp_path / "ct2", decode_overrides=past)
    assert str(theirs.value) == str(ours.value) and "+ max_len_b + 1 = 2385 exceeds" in str(ours.value)
    # An export from before nmt recorded the limit: CTranslate2's own refusal, as one line of the user's error.
    metadata_path = tmp_path / "ct2" / "nmt_export.json"
    metadata = json.loads(metadata_path.read_text())
    del metadata["max_target_positions"]
    metadata_path.write_text(json.dumps(metadata))
    refused = nmt("translate", "--engine", "ctranslate2", "--model", tmp_path / "ct2", "--prefix", longest * 2, "Go.")
    assert refused.returncode != 0 and refused.stdout == ""
    last = refused.stderr.splitlines()[-1]
    assert last.startswith("error: the prefix is longer than this model continues (CTranslate2: ")
    assert last.endswith("export the run again and nmt names the limit before decoding")
    assert "internal error" not in refused.stderr
    metadata_path.write_text(json.dumps({**metadata, "max_target_positions": "1024"}))
    with pytest.raises(NMTError, match=r"damaged or from another version \(ValueError: max_target_positions '1024' "):
        CTranslate2Engine(tmp_path / "ct2")


def test_the_export_sampling_near_zero_temperature_is_its_greedy_search(toy_transformer_run, tmp_path):
    """CTranslate2 divides its float32 logits by the temperature as they are: at 1e-40 they overflowed and every
    piece drawn was <blank>. A temperature that cold is the arg-max, as nmt's own sampler makes it."""
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    sources = toy_sources(10)
    greedy = [t.text for t in CTranslate2Engine(tmp_path / "ct2", decode_overrides={"beam_size": 1})
              .translate(sources)]
    for temperature in (1e-40, 1e-300):
        cold = CTranslate2Engine(tmp_path / "ct2", decode_overrides={
            "beam_size": 1, "sampling_topk": 0, "sampling_temperature": temperature})
        assert [t.text for t in cold.translate(sources)] == greedy


def test_the_export_samples_at_the_settings_bounds_as_nmt_does(toy_transformer_run, tmp_path):
    """A top-k past the vocabulary (nmt's sampler draws from all of it) and a top-p below float32's smallest number
    (the arg-max alone) were CTranslate2's ValueErrors: internal errors, exit 1."""
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    sources = toy_sources(10)

    def drawn(**settings):
        engine = CTranslate2Engine(tmp_path / "ct2", decode_overrides={"beam_size": 1, "sampling_seed": 3, **settings})
        return [t.text for t in engine.translate(sources)]

    assert drawn(sampling_topk=1_000_000) == drawn(sampling_topk=0)
    greedy = [t.text for t in CTranslate2Engine(tmp_path / "ct2", decode_overrides={"beam_size": 1})
              .translate(sources)]
    assert drawn(sampling_topk=0, sampling_topp=1e-300) == greedy


def test_export_samples_with_the_runs_settings_and_seed(toy_transformer_run, tmp_path):
    sampling = {"precision": "fp32", "beam_size": 1, "sampling_topk": 0, "sampling_temperature": 1.5}
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides=sampling)
    export_ctranslate2(translator, tmp_path / "ct2", "float32")
    exported = CTranslate2Engine(tmp_path / "ct2", decode_overrides=sampling)
    sources = toy_sources(30)
    drawn = exported.translate(sources, n_best=4)
    assert all(len(t.hypotheses) == 4 for t in drawn)
    assert len({h.text for t in drawn for h in t.hypotheses}) > 60  # draws, not one search's output four times
    target, compared = translator.tokenizers.target, 0
    for t in drawn:
        scores = [h.score for h in t.hypotheses]
        assert scores == sorted(scores, reverse=True)
        # The best draw's log-probability is the model's own, EOS included: nmt's teacher forcing of the very pieces
        # drawn gives it (where each piece names its id: a drawn piece that is no piece of the model's vocabulary
        # would be scored as <unk>). The toy model's draws at temperature 1.5 often run into the length limit, where
        # CTranslate2's own score has no EOS term.
        ids = [target.piece_to_id(p) for p in t.target_pieces]
        if [target.id_to_piece(i) for i in ids] == t.target_pieces and not any(target.is_unknown(i) for i in ids):
            compared += 1
            forced = translator._forced_log_probs([translator._encode(t.source)[0]], [ids])
            assert t.hypotheses[0].log_prob == pytest.approx(float(forced[0]), rel=1e-3, abs=1e-3)
    assert compared >= 20
    with pytest.raises(NMTError, match="seeds its sampler once, at load"):  # not silently the load-time seed
        exported.translate(sources[:2], decode=dataclasses.replace(exported.decode, sampling_seed=9))
    # The seed, set at load, makes the command reproducible; another seed draws otherwise.
    runs = [nmt("translate", "--engine", "ctranslate2", "--model", tmp_path / "ct2", "--seed", seed,
                input="\n".join(sources) + "\n") for seed in ("3", "3", "4")]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout != runs[2].stdout


def _pieces_only():
    from nmt.models.base import AttentionChoice

    return AttentionChoice()  # asks the Translator for the pieces (and the attention) of each output


def test_int8_export_stays_close_in_bleu_and_leaves_the_model_alone(toy_transformer_run, tmp_path):
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    before = {k: v.clone() for k, v in translator.model.state_dict().items()}
    pairs = [line.split("\t") for line in toy_parallel_corpus().splitlines()][:200]
    sources, references = [p[0] for p in pairs], [[p[1] for p in pairs]]
    scores = {}
    for quantization in ("float32", "int8"):
        export_ctranslate2(translator, tmp_path / quantization, quantization)
        hyps = [r.text for r in CTranslate2Engine(tmp_path / quantization).translate(sources, beam_size=1)]
        scores[quantization] = sacrebleu.corpus_bleu(hyps, references).score
    assert abs(scores["int8"] - scores["float32"]) < 3.0, scores
    after = translator.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before), "export changed the model's weights"


def test_every_listed_quantization_exports_and_translates(toy_transformer_run, tmp_path):
    # --quantization bf16, in the list since the first export, was an internal error (CTranslate2 says bfloat16).
    from nmt.export import QUANTIZATIONS

    translator = Translator.from_run(toy_transformer_run, device="cpu")
    sources = [line.split("\t")[0] for line in toy_parallel_corpus().splitlines()][:20]
    for quantization in QUANTIZATIONS:
        export_ctranslate2(translator, tmp_path / quantization, quantization)
        engine = CTranslate2Engine(tmp_path / quantization)
        assert engine.quantization == QUANTIZATIONS[quantization]
        assert sum(bool(t.text) for t in engine.translate(sources, beam_size=1)) >= 15, quantization
    result = nmt("export", "--run", toy_transformer_run, "--quantization", "bf16", "-o", tmp_path / "cli-bf16")
    assert result.returncode == 0, result.stderr


def test_cli_export_and_translate_with_the_engine(toy_transformer_run, tmp_path):
    out = tmp_path / "export"
    result = nmt("export", "--run", toy_transformer_run, "--quantization", "int8", "-o", out)
    assert result.returncode == 0, result.stderr
    assert {"model.bin", "spm.model", "normalizer.json", "nmt_export.json"} <= {p.name for p in out.iterdir()}
    again = nmt("export", "--run", toy_transformer_run, "-o", out)
    assert again.returncode == 2 and "exists; pass --force" in again.stderr
    heat = tmp_path / "heat.png"
    translated = nmt("translate", "--engine", "ctranslate2", "--model", out, "--attention", heat, "I have two cats.",
                     "")
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.split("\n")) == 3 and translated.stdout.split("\n")[1] == ""
    # CTranslate2 gives no attention: said as such (it was "the seq2seq model has no attention"), nothing written
    assert "warning: no attention to show: the CTranslate2 engine returns none" in translated.stderr
    assert "seq2seq" not in translated.stderr and not heat.exists()
    # --model names an export, so it names the engine too ("--model is for --engine ctranslate2" before);
    # an explicit --engine nmt beside it is still refused.
    alone = nmt("translate", "--model", out, "I have two cats.")
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout == nmt("translate", "--engine", "ctranslate2", "--model", out, "I have two cats.").stdout
    scored = nmt("score", "--model", out, input="I have two cats.\tJ'ai deux chats.\n")
    assert scored.returncode == 0 and len(scored.stdout.splitlines()) == 1, scored.stderr
    mixed = nmt("translate", "--engine", "nmt", "--model", out, "I have two cats.")
    assert mixed.returncode == 2 and "--model is for --engine ctranslate2" in mixed.stderr


def test_rnn_runs_cannot_be_exported(tmp_path, toy_data_dir):
    from nmt.config import load_config
    from nmt.train import train
    from tests_helpers import TOY_RUN, write_config

    cfg = load_config(write_config(tmp_path, base=TOY_RUN, model={"arch": "luong", "hidden_size": 32},
                                   train={"max_steps": 2}), warn=lambda *_: None)
    train(cfg, tmp_path / "run", toy_data_dir, log=lambda *_: None)
    with pytest.raises(NMTError, match="CTranslate2 export needs a Transformer; this run is a Luong"):
        export_ctranslate2(Translator.from_run(tmp_path / "run"), tmp_path / "out")


@pytest.mark.parametrize("where", ["run", "inside", "around"])
def test_export_never_writes_over_its_run(toy_transformer_run, tmp_path, where):
    import shutil

    run = tmp_path / "parent" / "run"
    shutil.copytree(toy_transformer_run, run)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    target = {"run": run, "inside": run / "export", "around": tmp_path / "parent"}[where]
    result = nmt("export", "--run", run, "-o", target, "--force")
    assert result.returncode == 2 and "export to a directory of its own" in result.stderr, result.stderr
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_force_replaces_only_a_previous_export(toy_transformer_run, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    refused = nmt("export", "--run", toy_transformer_run, "-o", precious, "--force")
    assert refused.returncode == 2 and "is not an nmt export" in refused.stderr
    assert (precious / "notes.txt").read_text() == "keep me"
    out = tmp_path / "export"
    assert nmt("export", "--run", toy_transformer_run, "-o", out).returncode == 0
    again = nmt("export", "--run", toy_transformer_run, "-o", out, "--force", "--quantization", "int8")
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "nmt_export.json").read_text())["quantization"] == "int8"
    # An empty folder made for it takes the export without --force (it was "exists; pass --force", then refused).
    (tmp_path / "made").mkdir()
    made = nmt("export", "--run", toy_transformer_run, "-o", tmp_path / "made")
    assert made.returncode == 0 and (tmp_path / "made" / "nmt_export.json").is_file(), made.stderr


def test_evaluate_and_serve_with_the_ctranslate2_engine(toy_transformer_run, toy_data_dir, tmp_path):
    out = tmp_path / "export"
    assert nmt("export", "--run", toy_transformer_run, "-o", out).returncode == 0
    # The export names the run's prepared data, so it is scored without the data directory too (with a warning).
    trained_on = json.loads((toy_transformer_run / "env.json").read_text())["prepared_data"]
    assert json.loads((out / "nmt_export.json").read_text())["prepared_data"] == trained_on
    result = nmt("evaluate", "--engine", "ctranslate2", "--model", out, "--split", "test", data_dir=tmp_path / "none")
    assert result.returncode == 0, result.stderr
    assert "BLEU" in result.stdout and "patient stop" in result.stderr and f"using {trained_on}," in result.stderr
    report = json.loads(next((out / "eval").glob("test.ctranslate2.beam*.report.json")).read_text())
    assert report["engine"] == "ctranslate2" and report["decode"]["patient_stop"] is False
    ours = nmt("evaluate", "--run", toy_transformer_run, "--split", "test", data_dir=toy_data_dir)
    ours_report = json.loads(next((toy_transformer_run / "eval").glob("test.beam*.report.json")).read_text())
    assert ours.returncode == 0 and abs(report["bleu"] - ours_report["bleu"]) < 3, (report["bleu"], ours_report)
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from nmt.serve import create_app

    with TestClient(create_app(CTranslate2Engine(out))) as client:
        health = client.get("/health").json()
        assert health["engine"] == "ctranslate2" and health["attention_layers"] == 0
        response = client.post("/translate", json={"sentences": ["I have two cats."], "attention": True})
        assert response.status_code == 200 and response.json()["translations"][0]["text"]
        held = client.post("/translate", json={"sentences": ["I have two cats."], "constraints": [["livres"]]})
        assert held.status_code == 400 and "CTranslate2 has no lexically constrained search" in held.text, held.text
        assert client.get("/health").json()["batches_run"] == 1  # refused before the queue
    refused = nmt("translate", "--engine", "ctranslate2", "--model", out, "--constraint", "livres", "I have two cats.")
    assert refused.returncode == 2 and "CTranslate2 has no lexically constrained search" in refused.stderr


def test_an_export_through_a_file_is_refused_before_converting(toy_transformer_run, tmp_path):
    from nmt.export import check_output_dir

    (tmp_path / "a-file").write_text("")
    with pytest.raises(NMTError, match=r"^cannot write the export to .*a-file/model: .*a-file is not a directory$"):
        check_output_dir(tmp_path / "a-file" / "model", toy_transformer_run, force=False)
    check_output_dir(tmp_path / "new" / "model", toy_transformer_run, force=False)  # made when written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize("setting, said", [
    (("CT2_VERBOSE", "abc"), "CTranslate2 cannot load {out}/model.bin with its settings from the environment "
                             "(CT2_VERBOSE='abc'): stoi; correct or unset them"),
    (("CT2_FORCE_CPU_ISA", "abc"), "CTranslate2 cannot read its settings from the environment "
                                   "(CT2_FORCE_CPU_ISA='abc'): Invalid CPU ISA: abc; correct or unset them"),
], ids=["verbose-at-load", "cpu-isa-at-translation"])
def test_ctranslate2_settings_it_cannot_read_are_named(toy_transformer_run, tmp_path, monkeypatch, setting, said):
    # CT2_VERBOSE=abc was "model.bin cannot be loaded by CTranslate2: stoi" (the model blamed); CT2_FORCE_CPU_ISA=abc
    # an internal ValueError at the first translation.
    out = tmp_path / "export"
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})
    export_ctranslate2(translator, out, "float32")
    monkeypatch.setenv(*setting)
    done = nmt("translate", "--model", out, "I have two cats.")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == "error: " + said.format(out=out), done.stderr
