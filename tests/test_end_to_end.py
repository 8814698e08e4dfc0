"""The whole pipeline on the toy corpus, in seconds: train, interrupt, resume exactly, translate, evaluate, plot."""

import json
import os
import re
import signal

import numpy as np
import pytest
import torch

from nmt.config import load_config
from nmt.data.download import sha256_file
from nmt.run_dir import Run
from nmt.train import train
from tests_helpers import TOY_RUN, nmt, write_config

pytestmark = pytest.mark.slow  # trains and calls the CLI: `make test` runs it, `make test-fast` skips it


def toy_config(tmp_path, name="toy", **sections):
    return load_config(write_config(tmp_path, name, base=TOY_RUN, **sections))


def last_weights(run_dir):
    return Run(run_dir).load(Run(run_dir).checkpoint_path("last"))["model"]


def test_cli_trains_translates_evaluates_and_plots(tmp_path, toy_data_dir):
    run = tmp_path / "run"
    config = write_config(tmp_path, base=TOY_RUN)
    trained = nmt("train", "--config", config, "--run-dir", run, data_dir=toy_data_dir)
    assert trained.returncode == 0, trained.stderr
    # First it says what trains (the size of the 1-layer d32 model with its tied 300-piece embeddings), on what,
    # where: the toy config pins one thread and the CPU; its precision follows the CPU (auto).
    summary = next(line for line in trained.stderr.splitlines() if line.startswith("transformer: "))
    assert re.fullmatch(r"transformer: \d{2},\d{3} parameters, vocabulary 300 joint; en→fr, \d{3} training pairs; "
                        r"cpu, 1 thread, (bf16 autocast|fp32)", summary), summary
    train_records, valid_records = Run(run).metrics.split()
    assert [r["step"] for r in valid_records] == [20, 40]
    times = [r["time_s"] for r in train_records + valid_records]
    assert all(t > 0 for t in times) and [r["time_s"] for r in train_records] == sorted(times[:len(train_records)])
    assert all(0 < r["mfu"] < 1 for r in train_records)
    # The step split of each window (host clocks on a CPU): the update's phases took time, and together with the
    # host's blocked seconds they fit in the window (time_s grows by the window and any validation between; 10 ms
    # for the rounding of seven figures and the last update's flag agreement, timed after its time_s).
    previous = 0.0
    for record in train_records:
        split = [record[f"{name}_s"] for name in ("data", "forward", "backward", "sync", "optimizer")]
        assert all(value >= 0 for value in split) and record["forward_s"] > 0 and record["backward_s"] > 0
        assert 0 <= record["host_blocked_s"]
        assert sum(split) + record["host_blocked_s"] <= record["time_s"] - previous + 0.01
        previous = record["time_s"]
    assert train_records[-1]["loss"] < train_records[0]["loss"]
    state = Run(run).load(Run(run).checkpoint_path("last"))
    assert state["model_args"]["embed_dim"] == 32 and state["model_args"]["src_vocab"] > 100
    assert isinstance(state["rng"], list) and len(state["rng"]) == 1  # one RNG state per rank

    translated = nmt("translate", "--run", run, "I have two cats.", "")
    assert translated.returncode == 0, translated.stderr
    assert translated.stdout.split("\n")[1] == "" and len(translated.stdout.split("\n")) == 3

    evaluated = nmt("evaluate", "--run", run, "--split", "valid", data_dir=toy_data_dir)
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads((run / "eval" / "valid.beam2.report.json").read_text())
    assert report["sentences"] > 20 and report["checkpoint"].endswith("best.pt")
    assert "using " in evaluated.stderr

    plotted = nmt("plot", "--run", run, "-o", tmp_path / "curves")  # no suffix: PNG
    assert plotted.returncode == 0, plotted.stderr
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def _signal_after_update(monkeypatch, at_step: int):
    """SIGTERM delivered right after optimizer.step() of update `at_step`: the point where weights are new but
    the step counter is not."""
    original, calls = torch.optim.AdamW.step, {"n": 0}

    def step(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == at_step:
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(torch.optim.AdamW, "step", step)


def test_interrupt_between_update_and_step_counter_resumes_exactly(tmp_path, toy_data_dir, monkeypatch):
    # Dropout on: the RNG streams must resume exactly too.
    cfg = toy_config(tmp_path, model={"dropout": 0.2}, train={"max_steps": 16, "save_every": 100, "eval_every": 8})
    straight = train(cfg, tmp_path / "straight", toy_data_dir, log=lambda *_: None)
    assert straight.step == 16

    _signal_after_update(monkeypatch, at_step=5)
    interrupted = train(cfg, tmp_path / "stopped", toy_data_dir, log=lambda *_: None)
    # The stop request is read at the update boundary, after the step counter has caught up with update 5's
    # weights (under torchrun the ranks agree on it at the next log line): weights and counters of one step.
    assert interrupted.step == 5
    monkeypatch.undo()
    resumed = train(cfg, tmp_path / "stopped", toy_data_dir, log=lambda *_: None)
    assert resumed.step == 16
    a, b = last_weights(tmp_path / "straight"), last_weights(tmp_path / "stopped")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    steps = [r["step"] for r in Run(tmp_path / "stopped").metrics.records() if r["type"] == "train"]
    assert steps == sorted(set(steps)), "no duplicate records after resume"


def test_resume_after_crash_trims_metrics_written_after_the_checkpoint(tmp_path, toy_data_dir):
    cfg = toy_config(tmp_path, train={"max_steps": 10, "save_every": 4, "eval_every": 100, "log_every": 1})
    run = Run(tmp_path / "run")
    train(cfg, run.directory, toy_data_dir, log=lambda *_: None)
    # A kill -9 after steps 9-10 were logged (and step 10 validated and saved) but as if the save had not landed
    # leaves 4 records past the step-8 checkpoint (train 9 and 10, step 10's validation and its checkpoint wait), and
    # maybe a torn line: make that state.
    state = run.load(run.checkpoint_path("last"))  # verified, checksum removed: rewrite without one
    state["progress"]["step"], state["progress"]["batch_in_epoch"] = 8, 8
    torch.save(state, run.checkpoint_path("last"))
    with open(run.metrics.path, "a") as handle:
        handle.write('{"type": "train", "step": 11, "lo')  # torn last line
    messages = []
    train(cfg, run.directory, toy_data_dir, log=messages.append)
    steps = [r["step"] for r in run.metrics.records() if r["type"] == "train"]
    assert steps == list(range(1, 11)), steps
    # The checkpoint waits up to step 8 are kept through the trim; step 10's is written again by the resumed run.
    assert [r["step"] for r in run.metrics.records() if r["type"] == "checkpoint"] == [4, 8, 10]
    assert any("dropped 4 metrics records" in m for m in messages), messages
    # Each session says where it started and how long its process took to get there.
    starts = [r for r in run.metrics.records() if r["type"] == "start"]
    assert [r["step"] for r in starts] == [0, 8] and all(r["setup_s"] > 0 for r in starts)
    # ...and where those seconds went, part by part, in order (a time-to-BLEU budget pays them every start)
    for record in starts:
        parts = record["setup_parts_s"]
        assert list(parts) == ["imports", "device_and_data", "parameter_count", "device_context", "model_init",
                               "model_to_device", "optimizer_and_arrays", "resume_and_run_directory",
                               "compile_and_graphs", "validation_and_flops", "rest"]
        assert all(seconds >= 0 for seconds in parts.values())
        assert sum(parts.values()) == pytest.approx(record["setup_s"], abs=0.02)
    assert any(m.startswith("training from step 8, ") and "after the process started" in m for m in messages)


def test_resume_from_another_directory_goes_on_with_the_runs_own_data(tmp_path, toy_data_dir):
    # The built-in corpus under a checksum: trained with --data-dir elsewhere, resumed from a directory that holds
    # no corpus, the run neither downloads (the URL given here does not exist) nor prepares again.
    toy_sha256 = sha256_file(toy_data_dir / "fra-eng" / "fra.txt")
    checked = {"verify_checksum": True, "corpus_sha256": toy_sha256}
    run = Run(tmp_path / "run")
    train(toy_config(tmp_path, data=checked, train={"max_steps": 3}), run.directory, toy_data_dir,
          log=lambda *_: None)
    messages = []  # resumed where it was trained: its data directory's own data, nothing to say
    train(toy_config(tmp_path, data=checked, train={"max_steps": 4}), run.directory, toy_data_dir, log=messages.append)
    assert f"resuming {run.directory} from step 3" in messages
    assert not any("resuming on" in m for m in messages)
    trained_on = run.prepared_data()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = write_config(tmp_path, "more", base=TOY_RUN, data=checked, train={"max_steps": 6})
    resumed = nmt("train", "--config", config, "--run-dir", run.directory, "--url", tmp_path / "absent.zip",
                  data_dir=elsewhere / "data", cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming on {trained_on}, where the run was trained" in resumed.stderr
    assert run.load(run.checkpoint_path("last"))["progress"]["step"] == 6
    assert not (elsewhere / "data").exists(), "nothing downloaded or prepared"
    # Another text than the run's (a different checksum) is not the run's data: that one is fetched, here in vain.
    other = write_config(tmp_path, "other", base=TOY_RUN, data={**checked, "corpus_sha256": "0" * 64},
                         train={"max_steps": 8})
    refused = nmt("train", "--config", other, "--run-dir", run.directory, "--url", tmp_path / "absent.zip",
                  data_dir=elsewhere / "data", cwd=elsewhere)
    assert refused.returncode != 0 and "absent.zip" in refused.stderr and "Traceback" not in refused.stderr


def test_stale_checkpoint_temp_file_of_a_killed_save_is_removed_on_resume(tmp_path, toy_data_dir):
    run = Run(tmp_path / "run")
    train(toy_config(tmp_path, train={"max_steps": 4}), run.directory, toy_data_dir, log=lambda *_: None)
    stale = run.checkpoint_dir / ".last.pt.k1ll3d"
    stale.write_bytes(b"\0" * 1000)
    train(toy_config(tmp_path, train={"max_steps": 6}), run.directory, toy_data_dir, log=lambda *_: None)
    assert not stale.exists()


def test_invalid_utf8_on_stdin_keeps_every_line(tmp_path, toy_data_dir):
    run = tmp_path / "run"
    train(toy_config(tmp_path, train={"max_steps": 4}), run, toy_data_dir, log=lambda *_: None)
    result = nmt("translate", "--run", run, input=b"i have two cats .\ncaf\xe9 .\n\nwe have six keys .\n",
                 text=False)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.decode().split("\n")[:-1]) == 4
    # ... and says which line it could not read, rather than translating garbled input in silence
    assert result.stderr.decode().splitlines() == [
        "warning: stdin line 2 is not UTF-8 (byte 3): its bad bytes are read as U+FFFD"]
    scored = nmt("score", "--run", run, input=b"caf\xe9 .\tun caf\xe9 .\nhello .\tbonjour .\n", text=False)
    assert scored.returncode == 0 and len(scored.stdout.splitlines()) == 2, scored.stderr
    assert b"warning: stdin line 1 is not UTF-8 (byte 3)" in scored.stderr


def test_second_training_on_the_same_run_is_refused(tmp_path, toy_data_dir):
    cfg = toy_config(tmp_path)
    run = Run(tmp_path / "run")
    with run.lock():
        result = nmt("train", "--config", write_config(tmp_path, base=TOY_RUN), "--run-dir", run.directory,
                     data_dir=toy_data_dir)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {run.directory} is in use by pid {os.getpid()}; wait for it or use " \
                                    "another --run-dir"
    assert not run.checkpoint_path("last").exists()
    assert train(cfg, run.directory, toy_data_dir, log=lambda *_: None).step == 40  # free again


def test_changed_data_order_setting_on_resume_warns(tmp_path, toy_data_dir):
    run_dir = tmp_path / "run"
    train(toy_config(tmp_path, train={"max_steps": 4}), run_dir, toy_data_dir, log=lambda *_: None)
    messages = []
    train(toy_config(tmp_path, train={"max_steps": 6, "seed": 7}), run_dir, toy_data_dir, log=messages.append)
    assert any("train.seed changed from 1234 to 7" in m and "not exact" in m for m in messages), messages


@pytest.mark.parametrize("which", ["best", "last"])
def test_translate_names_an_unvalidated_newer_last(tmp_path, toy_data_dir, which, monkeypatch):
    run_dir = tmp_path / "run"
    cfg = toy_config(tmp_path, train={"max_steps": 30, "eval_every": 20, "save_every": 5})
    train(cfg, run_dir, toy_data_dir, log=lambda *_: None)  # validated at 20 and (max_steps) 30
    _signal_after_update(monkeypatch, at_step=5)
    cfg = toy_config(tmp_path, train={"max_steps": 100, "eval_every": 20, "save_every": 50})
    assert train(cfg, run_dir, toy_data_dir, log=lambda *_: None).step == 35  # saved on stop, never validated
    args = ["--checkpoint", run_dir / "checkpoints" / "last.pt"] if which == "last" else []
    result = nmt("translate", "--run", run_dir, *args, "I have two cats.")
    assert result.returncode == 0, result.stderr
    if which == "best":
        assert "last.pt (step 35) is newer and was never validated" in result.stderr
    else:
        assert "never validated" not in result.stderr


def test_time_budget_stops_with_a_validated_checkpoint(tmp_path, toy_data_dir):
    cfg = toy_config(tmp_path, train={"max_steps": 100000, "eval_every": 100000, "time_budget_s": 0.5})
    progress = train(cfg, tmp_path / "run", toy_data_dir, log=lambda *_: None)
    assert 0 < progress.step < 100000 and progress.elapsed_s >= 0.5
    _, valid = Run(tmp_path / "run").metrics.split()
    assert valid and valid[-1]["step"] == progress.step
    again = train(cfg, tmp_path / "run", toy_data_dir, log=lambda *_: None)
    assert again.step == progress.step  # the budget is spent: nothing more to do


def test_keep_last_and_average(tmp_path, toy_data_dir):
    run = Run(tmp_path / "run")
    cfg = toy_config(tmp_path, train={"max_steps": 20, "save_every": 4, "keep_last": 3})
    train(cfg, run.directory, toy_data_dir, log=lambda *_: None)
    assert [p.name for p in run.step_checkpoints()] == ["step-0000012.pt", "step-0000016.pt", "step-0000020.pt"]
    result = nmt("average", "--run", run.directory, "--last", "3")
    assert result.returncode == 0, result.stderr
    averaged = run.load(run.checkpoint_path("averaged"))["model"]
    inputs = [run.load(p)["model"] for p in run.step_checkpoints()]
    for key in averaged:
        torch.testing.assert_close(averaged[key], sum(w[key] for w in inputs) / 3)
    assert "(the run keeps" not in result.stdout
    translated = nmt("translate", "--run", run.directory, "I have two cats.")
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 1, translated.stderr
    fewer = nmt("average", "--run", run.directory, "--last", "5")  # asked for more than the run keeps: it says so
    assert fewer.returncode == 0 and "(the run keeps 3 of the 5 asked for)" in fewer.stdout, fewer.stderr
    cfg = toy_config(tmp_path, train={"max_steps": 4})
    train(cfg, tmp_path / "plain", toy_data_dir, log=lambda *_: None)
    too_few = nmt("average", "--run", tmp_path / "plain")
    assert too_few.returncode == 2 and "has 0 step checkpoints" in too_few.stderr
    allowed = nmt("average", "--run", tmp_path / "plain", "--allow-fewer")
    assert allowed.returncode == 0 and "nothing averaged" in allowed.stdout, allowed.stderr
    assert not (tmp_path / "plain" / "checkpoints" / "averaged.pt").exists()


def test_bf16_autocast_on_cpu_trains_and_resumes_deterministically(tmp_path, toy_data_dir):
    cfg = toy_config(tmp_path, model={"dropout": 0.1}, train={"precision": "bf16", "max_steps": 12,
                                                              "save_every": 6, "eval_every": 100})
    train(cfg, tmp_path / "straight", toy_data_dir, log=lambda *_: None)
    half = toy_config(tmp_path, model={"dropout": 0.1}, train={"precision": "bf16", "max_steps": 6,
                                                               "save_every": 6, "eval_every": 100})
    train(half, tmp_path / "resumed", toy_data_dir, log=lambda *_: None)
    train(cfg, tmp_path / "resumed", toy_data_dir, log=lambda *_: None)
    a, b = last_weights(tmp_path / "straight"), last_weights(tmp_path / "resumed")
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = [r["loss"] for r in Run(tmp_path / "straight").metrics.split()[0]]
    assert losses[-1] < losses[0]


def test_eval_max_sentences_bounds_the_dev_loss_too(tmp_path, toy_data_dir):
    """Validation's dev loss is the NLL of the first N valid pairs, not of the whole split, when N is set."""
    from nmt.data.batching import collate
    from nmt.train import Trainer

    dev_loss, trainers = {}, {}
    for limit in (5, 0):
        cfg = toy_config(tmp_path, train={"eval_max_sentences": limit, "precision": "fp32"})
        trainers[limit] = Trainer(cfg, Run(tmp_path / f"run-{limit}"), toy_data_dir, log=lambda *_: None)
        trainers[limit].setup()
        dev_loss[limit] = trainers[limit].validate()["dev_loss"]
    bounded = trainers[5]
    first_five = collate(bounded.dev_set.pairs, np.arange(5))
    with torch.no_grad():
        bounded.model.eval()
        expected = float(bounded.token_loss(bounded.model, first_five, 0.0)) / first_five.tgt_tokens
    assert dev_loss[5] == pytest.approx(expected, abs=1e-4)
    assert dev_loss[0] != pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize("arch, train_settings, longest_first", [
    ("bahdanau", {}, True), ("seq2seq", {"length_multiple": 8}, True), ("transformer", {}, False),
    ("bahdanau", {"compile": True, "length_multiple": 8}, False)],  # compiled: the masked recurrence, no packing
    ids=["bahdanau", "seq2seq-static", "transformer", "bahdanau-compiled"])
def test_recurrent_training_batches_come_longest_source_first(tmp_path, toy_data_dir, arch, train_settings,
                                                             longest_first):
    """A packing encoder's batches carry their source lengths on the host, rows longest first (no host sync)."""
    from nmt.data.tokenizer import PAD_ID
    from nmt.train import Trainer

    cfg = toy_config(tmp_path, model={"arch": arch, "hidden_size": 32}, train=train_settings)
    trainer = Trainer(cfg, Run(tmp_path / "run"), toy_data_dir, log=lambda *_: None)
    batch = trainer.feed.host_batches([np.arange(12)])[0]
    if not longest_first:
        assert batch.source_lengths is None
        return
    assert batch.source_lengths.tolist() == batch.src.ne(PAD_ID).sum(1).tolist()
    assert np.all(np.diff(batch.source_lengths) <= 0) and len(set(batch.source_lengths.tolist())) > 1
    encoder, seen = trainer.model.encoder, []
    encoder.forward = lambda src, lengths=None, pack=encoder.forward: (seen.append(lengths), pack(src, lengths))[1]
    assert torch.isfinite(trainer.token_loss(trainer.model, batch, 0.0))
    assert len(seen) == 1 and seen[0] is batch.source_lengths  # the encoder packed with the host lengths


def test_training_steps_attend_with_the_kernels_of_their_precision(tmp_path, toy_data_dir, monkeypatch):
    """Every loss the trainer computes goes through `training_attention_kernels` with the autocast dtype in force
    (on a CPU in bf16: SDPA's math kernel, tests/test_device.py)."""
    from nmt import train as train_module
    seen, real = [], train_module.training_attention_kernels
    monkeypatch.setattr(train_module, "training_attention_kernels",
                        lambda device, dtype: seen.append((device.type, dtype)) or real(device, dtype))
    cfg = toy_config(tmp_path, train={"max_steps": 3, "eval_every": 100, "precision": "bf16"})
    progress = train(cfg, tmp_path / "run", toy_data_dir, log=lambda *_: None)
    assert progress.step == 3 and len(seen) > 3 and set(seen) == {("cpu", torch.bfloat16)}  # updates, dev loss


def test_dev_bleu_in_training_tokenizes_for_the_target_language(tmp_path, toy_data_dir):
    from nmt.train import Trainer

    scores = {}
    for target in ("fr", "zh"):  # the toy corpus labelled as Chinese: its data is the same (languages are labels)
        trainer = Trainer(toy_config(tmp_path, data={"target_lang": target}), Run(tmp_path / target), toy_data_dir,
                          log=lambda *_: None)
        trainer.setup()
        scores[target] = trainer.validate()["bleu_signature"]
    assert "|tok:13a|" in scores["fr"] and "|tok:zh|" in scores["zh"]


def test_validation_decodes_greedily_when_the_config_samples(tmp_path, toy_data_dir):
    """A config that samples (for back-translation) must not make dev BLEU, which picks best.pt, a matter of
    chance: the same initial weights validate as they do under a config that searches."""
    from nmt.train import Trainer

    results = {}
    for name, decode in (("sampling", {"beam_size": 1, "sampling_topk": 0, "sampling_temperature": 3.0}),
                         ("searching", {"beam_size": 1})):
        trainer = Trainer(toy_config(tmp_path, name, decode=decode), Run(tmp_path / name), toy_data_dir,
                          log=lambda *_: None)
        trainer.setup()
        results[name] = trainer.validate()["chrf"], trainer.translator.decode.samples
    assert results["sampling"] == results["searching"] and results["sampling"][1] is False
