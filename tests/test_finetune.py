"""Fine-tuning: a new run on a corpus of one's own that starts from another run's weights and tokenizer
(`train.init_from`), resumes without that run, and refuses what cannot fit it."""

import json
import re
import shutil

import pytest
import torch

from nmt.checkpoint import load_checkpoint
from nmt.config import load_config
from nmt.data.prepare import ensure_prepared
from nmt.errors import NMTError
from nmt.evaluate import compare_runs, evaluate, load_test_set
from nmt.finetune import parent_run, with_borrowed_tokenizer
from nmt.run_dir import Run
from nmt.train import train
from nmt.translator import Translator
from tests_helpers import TOY_RUN, toy_parallel_corpus, write_config

QUIET = dict(log=lambda *_: None)


def _own_corpus(tmp_path):
    """The toy pairs as a TSV of one's own, in their original case (the parent's corpus lowercases English)."""
    tsv = tmp_path / "domain.tsv"
    tsv.write_text(toy_parallel_corpus())
    return tsv


def _child_config(tmp_path, parent, train=None, **sections):
    data = {"corpus": str(_own_corpus(tmp_path)), "source_lang": "en", "target_lang": "fr", "valid_fraction": 0.1,
            "test_fraction": 0.1, "vocab_size": 500, **sections.pop("data", {})}
    # 1e-9 with no weight decay: after its updates the weights are the parent's to ~1e-8 (Adam steps by ~lr).
    training = {"init_from": str(parent), "max_steps": 2, "lr": 1e-9, "weight_decay": 0.0, "eval_every": 2,
                "save_every": 2, **(train or {})}
    return load_config(write_config(tmp_path, name="child", base=TOY_RUN, data=data, train=training,
                                    model={"num_layers": 2, **sections.pop("model", {})}, **sections))


def test_a_fine_tuned_run_starts_from_its_parents_weights_tokenizer_and_normalization(tmp_path, toy_transformer_run):
    parent = toy_transformer_run
    cfg = _child_config(tmp_path, parent)
    said = []
    # `nmt prepare` of this config makes the data training then uses (no second preparation).
    prepared = ensure_prepared(with_borrowed_tokenizer(cfg, log=said.append).data, tmp_path / "data", **QUIET)
    assert said == [f"tokenizer and normalization of {parent} (data.vocab_size=300, as it was made)"]
    train(cfg, tmp_path / "run", tmp_path / "data", **QUIET)
    run = Run(tmp_path / "run")
    env = json.loads(run.env_path.read_text())
    assert env["prepared_data"] == str(prepared.resolve())
    assert env["init_from"]["checkpoint"] == str((parent / "checkpoints" / "best.pt").resolve())
    assert env["init_from"]["step"] == 150
    assert (run.directory / "spm.model").read_bytes() == (parent / "spm.model").read_bytes()
    assert (prepared / "spm.model").read_bytes() == (parent / "spm.model").read_bytes()
    assert json.loads(run.normalizer_path.read_text())["lowercase_source"] is True  # the parent's, not "none"
    saved = run.read_config().data
    assert saved.vocab_size == 300 and saved.tokenizer_from == str(parent.resolve()) and saved.tokenizer_sha256
    theirs, ours = load_checkpoint(parent / "checkpoints" / "best.pt")["model"], \
        load_checkpoint(run.checkpoint_path("last"))["model"]
    assert theirs.keys() == ours.keys()
    for key in theirs:
        torch.testing.assert_close(ours[key], theirs[key], atol=1e-6, rtol=0, msg=key)
    # What the parent learned translates the new corpus's cased English at once (normalized as the parent was).
    child, its_parent = (Translator.from_run(d, device="cpu", decode_overrides={"precision": "fp32"})
                         for d in (run.directory, parent))
    said = child.translate(["I have two cats."])[0].text
    assert said == its_parent.translate(["i have two cats ."])[0].text and "chats" in said


def test_a_fine_tuned_run_resumes_and_evaluates_once_its_parent_is_gone(tmp_path, toy_transformer_run):
    parent = tmp_path / "parent"
    shutil.copytree(toy_transformer_run, parent)
    cfg = _child_config(tmp_path, parent, train={"lr": 1e-3, "max_steps": 4})
    train(cfg, tmp_path / "run", tmp_path / "data", **QUIET)
    shutil.rmtree(parent)
    said = []
    longer = _child_config(tmp_path, parent, train={"lr": 1e-3, "max_steps": 6})
    progress = train(longer, tmp_path / "run", tmp_path / "data", log=said.append)
    assert progress.step == 6 and f"resuming {tmp_path / 'run'} from step 4" in said
    assert not any("train.init_from" in line for line in said)  # the same setting: nothing to say
    engine = Translator.from_run(tmp_path / "run", device="cpu", decode_overrides={"precision": "fp32"})
    report = evaluate(engine, load_test_set(engine.config, "test", None, None, tmp_path / "data"), tmp_path / "eval")
    assert report["sentences"] > 0
    # Another parent on resume is not taken (the run goes on from its last.pt), and it says so.
    said.clear()
    other = _child_config(tmp_path, toy_transformer_run, train={"lr": 1e-3, "max_steps": 8})
    train(other, tmp_path / "run", tmp_path / "data", log=said.append)
    assert any("train.init_from is" in line and "resumes from its last.pt" in line for line in said)


@pytest.mark.parametrize("sections, message", [
    (lambda parent: {"model": {"embed_dim": 64}}, "is a model of another shape (model.embed_dim 64 here, 32 there)"),
    (lambda parent: {"data": {"lowercase_source": False}}, "data.lowercase_source is False here but True in"),
    (lambda parent: {"data": {"tokenizer_sha256": "0" * 64, "tokenizer_from": str(parent)}},
     "is not the one data.tokenizer_sha256 names"),
    (lambda parent: {"data": {"tokenizer_sha256": "0" * 64}},
     "filled in by nmt from data.tokenizer_from: set that too, or neither"),
])
def test_what_cannot_fit_the_parent_is_refused_before_the_data_is_prepared(tmp_path, toy_transformer_run, sections,
                                                                         message):
    cfg = _child_config(tmp_path, toy_transformer_run, **sections(toy_transformer_run))
    with pytest.raises(NMTError, match=re.escape(message)):
        train(cfg, tmp_path / "run", tmp_path / "data", **QUIET)
    assert not (tmp_path / "run" / "checkpoints" / "last.pt").exists()
    assert not (tmp_path / "data").exists()  # nor was the corpus prepared: a big one takes minutes


def test_a_parent_that_is_no_run_is_one_line(tmp_path, toy_transformer_run):
    with pytest.raises(NMTError, match=r"^train.init_from: .*nowhere does not exist \(give a run directory, or a "):
        train(_child_config(tmp_path, tmp_path / "nowhere"), tmp_path / "run", tmp_path / "data", **QUIET)
    mistyped = toy_transformer_run / "checkpoints" / "bset.pt"  # it said "... is not a run directory (no config.yaml)"
    with pytest.raises(NMTError, match=r"^train.init_from: .*checkpoints/bset.pt does not exist"):
        train(_child_config(tmp_path, mistyped), tmp_path / "run", tmp_path / "data", **QUIET)
    (tmp_path / "empty").mkdir()
    with pytest.raises(NMTError, match=r"^train.init_from: .*empty is not a run directory"):
        train(_child_config(tmp_path, tmp_path / "empty"), tmp_path / "run", tmp_path / "data", **QUIET)
    other = tmp_path / "other"
    shutil.copytree(toy_transformer_run, other)
    (other / "spm.model").write_bytes((other / "spm.model").read_bytes() + b"\0")
    with pytest.raises(NMTError, match="has another tokenizer than train.init_from"):
        train(_child_config(tmp_path, toy_transformer_run, data={"tokenizer_from": str(other)}), tmp_path / "run",
              tmp_path / "data", **QUIET)


def test_a_parent_is_named_from_home_as_data_files_are(tmp_path, toy_transformer_run, monkeypatch):
    # data.corpus took `~/x.tsv`; train.init_from read `~/runs/base` as a folder named "~" here.
    shutil.copytree(toy_transformer_run, tmp_path / "runs" / "base")
    monkeypatch.setenv("HOME", str(tmp_path))
    run, checkpoint = parent_run("~/runs/base")
    assert run.directory == tmp_path / "runs" / "base" and checkpoint is None
    # `~someone` who is not a user of this machine was pathlib's RuntimeError, an internal error.
    with pytest.raises(NMTError, match=r"^train.init_from ~nosuchuser-nmt/base: no user 'nosuchuser-nmt' on this "):
        parent_run("~nosuchuser-nmt/base")


def test_a_fine_tuned_run_is_compared_with_its_parent_on_shared_files_not_on_its_split(tmp_path, toy_transformer_run):
    domain = tmp_path / "plural.tsv"  # a part of the parent's language: its test split is not the parent's
    domain.write_text("".join(line + "\n" for line in toy_parallel_corpus().splitlines() if "have" in line))
    cfg = _child_config(tmp_path, toy_transformer_run, data={"corpus": str(domain)})
    train(cfg, tmp_path / "run", tmp_path / "data", **QUIET)
    runs = [tmp_path / "run", toy_transformer_run]
    # Each was trained on its own corpus: the parent may have trained on the child's test sentences.
    with pytest.raises(NMTError, match="trained on other data than .*: their test splits differ; compare them on one "
                                       "test set with --src FILE --ref FILE"):
        compare_runs(runs, "test", None, None, {"precision": "fp32"}, "cpu", tmp_path / "data")
    (tmp_path / "src.txt").write_text("I have two cats.\nShe has ten books.\n")
    (tmp_path / "ref.txt").write_text("J'ai deux chats.\nElle a dix livres.\n")
    comparison = compare_runs(runs, "test", tmp_path / "src.txt", [tmp_path / "ref.txt"], {"precision": "fp32"},
                              "cpu", tmp_path / "data")
    assert [row["system"] for row in comparison.rows] == [str(r) for r in runs]
    assert comparison.rows[0]["bleu"] == comparison.rows[1]["bleu"]  # lr 1e-9: the parent's weights, translating alike


def test_a_checkpoint_file_names_its_run_and_one_outside_a_run_is_refused(tmp_path, toy_transformer_run):
    last = toy_transformer_run / "checkpoints" / "last.pt"
    run, checkpoint = parent_run(str(last))
    assert run.directory == toy_transformer_run and checkpoint == last
    loose = tmp_path / "model.pt"
    shutil.copyfile(last, loose)
    with pytest.raises(NMTError, match=r"^train.init_from: .*model.pt is not in a run's checkpoints/ folder: give "
                                       "the run directory"):
        train(_child_config(tmp_path, loose), tmp_path / "run", tmp_path / "data", **QUIET)


def test_parent_weights_never_meet_data_on_another_tokenizer(tmp_path, toy_transformer_run):
    # A Trainer built from a config that skipped the borrowing (a script's) would feed the parent other piece ids.
    from nmt.finetune import load_parent_weights
    from nmt.models import build_model

    cfg = _child_config(tmp_path, toy_transformer_run)
    pieces = Run(toy_transformer_run).tokenizers().source.get_piece_size()
    with pytest.raises(NMTError, match="the data is not on .*'s tokenizer"):
        load_parent_weights(build_model(cfg.model, pieces, pieces, True), cfg)
    borrowed = with_borrowed_tokenizer(cfg)
    record = load_parent_weights(build_model(borrowed.model, pieces, pieces, True), borrowed)
    assert record["step"] == 150


def test_a_child_of_another_language_pair_is_said_to_be_one(tmp_path, toy_transformer_run):
    # Transfer to another pair (a parent's weights for a low-resource pair) is allowed, and said.
    said = []
    cfg = _child_config(tmp_path, toy_transformer_run, data={"source_lang": "en", "target_lang": "es"})
    with_borrowed_tokenizer(cfg, log=said.append)
    assert said == [f"tokenizer and normalization of {toy_transformer_run} (data.vocab_size=300, as it was made; it "
                    "translates en→fr, this run en→es)"]


def test_a_child_keeps_joiners_as_its_parent_did(tmp_path, toy_transformer_run):
    """Its tokenizer and weights saw text as the parent normalized it: a parent from before joiners were kept
    (normalizer.json without keep_joiners) had them removed, and so must its children."""
    assert json.loads(Run(toy_transformer_run).normalizer_path.read_text())["keep_joiners"] is True
    assert with_borrowed_tokenizer(_child_config(tmp_path, toy_transformer_run)).data.keep_joiners is True
    old = tmp_path / "old-parent"
    shutil.copytree(toy_transformer_run, old)
    normalization = json.loads((old / "normalizer.json").read_text())
    del normalization["keep_joiners"]
    (old / "normalizer.json").write_text(json.dumps(normalization))
    borrowed = with_borrowed_tokenizer(_child_config(tmp_path, old))
    assert borrowed.data.keep_joiners is False
    with pytest.raises(NMTError, match="data.keep_joiners is True here but False in"):
        with_borrowed_tokenizer(_child_config(tmp_path, old, data={"keep_joiners": True}))


def test_resuming_on_another_corpus_is_refused_and_fine_tuning_is_the_way(tmp_path):
    # Same data settings, another text: it got a SentencePiece model of its own, and the resumed weights met other
    # piece ids while the run's spm.model was replaced (its earlier checkpoints spoiled too). Now: refused.
    def config(corpus: str, **train_settings):
        return load_config(write_config(tmp_path, name=corpus, base=TOY_RUN, model={"num_layers": 1},
                                        data={"corpus": str(tmp_path / f"{corpus}.tsv"), "source_lang": "en",
                                              "target_lang": "fr", "vocab_size": 320, "valid_fraction": 0.1,
                                              "test_fraction": 0.1}, train={"max_steps": 4, **train_settings}))
    (tmp_path / "a.tsv").write_text(toy_parallel_corpus())
    (tmp_path / "b.tsv").write_text(toy_parallel_corpus().replace("have", "own").replace("avons", "possédons"))
    train(config("a"), tmp_path / "run", tmp_path / "data", **QUIET)
    before = (tmp_path / "run" / "spm.model").read_bytes()
    with pytest.raises(NMTError, match="was trained with another vocabulary than the data prepared for this config .*"
                                       "another corpus\\? .* --set train.init_from="):
        train(config("b", max_steps=8), tmp_path / "run", tmp_path / "data", **QUIET)
    assert (tmp_path / "run" / "spm.model").read_bytes() == before
    assert Run(tmp_path / "run").read_config().data.corpus.endswith("a.tsv")
    progress = train(config("b", max_steps=8, init_from=str(tmp_path / "run")), tmp_path / "b-run", tmp_path / "data",
                     **QUIET)
    assert progress.step == 8 and (tmp_path / "b-run" / "spm.model").read_bytes() == before
