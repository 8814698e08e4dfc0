"""train.eval_in_background (nmt/background_validation.py): validations of a copy of the weights on a thread, their
outcomes acted on at validation points and waited for by checkpoints, so that a run trains, chooses best.pt, stops
and resumes as the inline run does, whatever the thread's timing."""

import threading
import time

import pytest
import torch

from nmt.config import load_config
from nmt.errors import ConfigError, NMTError
from nmt.run_dir import Run
from nmt.train import Trainer, train
from tests_helpers import TOY_RUN, write_config

# fp32: under bf16 autocast a CPU validates inline (see the last test), and a numeric comparison pins its precision.
SETTINGS = {"max_steps": 24, "eval_every": 6, "save_every": 12, "patience": 100, "precision": "fp32"}
SCORED = ("step", "epoch", "dev_loss", "dev_bleu", "dev_chrf", "best_bleu", "best_score")


def valid_records(run_dir) -> list[dict]:
    return [r for r in Run(run_dir).metrics.records() if r["type"] == "valid"]


def last_weights(run_dir, kind="last") -> dict:
    run = Run(run_dir)
    return run.load(run.checkpoint_path(kind))["model"]


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.fixture
def slow_validation(monkeypatch):
    """Validation on the thread takes a while: training runs several updates meanwhile."""
    validate = Trainer.validate

    def slowly(self):
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.3)
        return validate(self)

    monkeypatch.setattr(Trainer, "validate", slowly)


def test_background_validation_trains_scores_and_picks_best_pt_as_inline(tmp_path, toy_data_dir, slow_validation):
    said = {}
    for background in (False, True):
        cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={**SETTINGS, "eval_in_background": background}))
        said[background] = []
        train(cfg, tmp_path / f"bg{background}", toy_data_dir, log=said[background].append)
    inline, background = valid_records(tmp_path / "bgFalse"), valid_records(tmp_path / "bgTrue")
    assert [r["step"] for r in inline] == [6, 12, 18, 24]
    assert [{k: r[k] for k in SCORED} for r in background] == [{k: r[k] for k in SCORED} for r in inline]
    # All but the last (validated inline at the end) ran beside training and were taken later.
    assert [r.get("background", False) for r in background] == [True, True, True, False]
    assert all(r["taken_at_step"] > r["step"] for r in background[:-1])
    assert_same_weights(last_weights(tmp_path / "bgTrue"), last_weights(tmp_path / "bgFalse"))
    assert_same_weights(last_weights(tmp_path / "bgTrue", "best"), last_weights(tmp_path / "bgFalse", "best"))
    assert any("train.eval_in_background" in line for line in said[True])


def test_patience_stops_one_validation_later_than_inline(tmp_path, toy_data_dir, slow_validation):
    """A validation's outcome stops training at the next validation point: never at a step that depends on when
    the thread finished. The lr is too small to change the dev loss, so no validation after the first gains."""
    stopped = {}
    for background in (False, True):
        cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={
            **SETTINGS, "patience": 1, "best_metric": "loss", "lr": 1e-12, "warmup_steps": 0,
            "eval_in_background": background}))
        stopped[background] = train(cfg, tmp_path / f"bg{background}", toy_data_dir, log=lambda *_: None).step
        saved = Run(tmp_path / f"bg{background}").load(Run(tmp_path / f"bg{background}").checkpoint_path("best"))
        assert saved["step"] == 6
    assert (stopped[False], stopped[True]) == (12, 18)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_a_checkpoint_saved_as_its_validation_began_resumes_exactly(tmp_path, toy_data_dir, slow_validation,
                                                                  monkeypatch, dropout):
    """The process dies just after the step-12 checkpoint, whose validation was running: the resumed run validates
    those weights again and ends as the uninterrupted run does. With dropout too: building the validation's copy of
    the model draws no random numbers, which would shift the resumed run's dropout masks."""
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, model={**TOY_RUN["model"], "dropout": dropout},
                                   train={**SETTINGS, "eval_in_background": True}))
    train(cfg, tmp_path / "straight", toy_data_dir, log=lambda *_: None)

    save = Trainer.save_checkpoint

    def save_then_die(self):
        save(self)
        if self.progress.step == 12:
            assert self.progress.validation_pending
            self.writer.wait()
            raise RuntimeError("killed")

    monkeypatch.setattr(Trainer, "save_checkpoint", save_then_die)
    with pytest.raises(RuntimeError, match="killed"):
        train(cfg, tmp_path / "resumed", toy_data_dir, log=lambda *_: None)
    assert Run(tmp_path / "resumed").load(Run(tmp_path / "resumed").checkpoint_path("last"))["progress"][
        "validation_pending"]
    monkeypatch.setattr(Trainer, "save_checkpoint", save)
    train(cfg, tmp_path / "resumed", toy_data_dir, log=lambda *_: None)
    straight, resumed = valid_records(tmp_path / "straight"), valid_records(tmp_path / "resumed")
    assert [{k: r[k] for k in SCORED} for r in resumed] == [{k: r[k] for k in SCORED} for r in straight]
    assert_same_weights(last_weights(tmp_path / "resumed"), last_weights(tmp_path / "straight"))
    assert_same_weights(last_weights(tmp_path / "resumed", "best"), last_weights(tmp_path / "straight", "best"))


def test_a_failed_background_validation_stops_training_with_its_error(tmp_path, toy_data_dir, monkeypatch):
    def failing(self):
        raise NMTError("valid split unreadable")

    monkeypatch.setattr(Trainer, "validate", failing)
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={**SETTINGS, "eval_in_background": True}))
    with pytest.raises(NMTError, match="valid split unreadable"):
        train(cfg, tmp_path / "run", toy_data_dir, log=lambda *_: None)


def test_the_plateau_schedule_refuses_background_validation(tmp_path):
    with pytest.raises(ConfigError, match="train.eval_in_background: the plateau schedule"):
        load_config(write_config(tmp_path, base=TOY_RUN, train={"schedule": "plateau", "eval_in_background": True}))


def test_a_cpu_under_bf16_autocast_validates_inline_and_says_why(tmp_path, toy_data_dir):
    """Training switches SDPA's kernels process-wide at every bf16 update on a CPU: a thread would see them."""
    said = []
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={
        **SETTINGS, "precision": "bf16", "max_steps": 12, "eval_in_background": True}))
    train(cfg, tmp_path / "run", toy_data_dir, log=said.append)
    assert any("not on a CPU under bf16 autocast" in line for line in said)
    assert [r.get("background", False) for r in valid_records(tmp_path / "run")] == [False, False]


def test_the_training_threads_heap_trimmer_stays_on_the_training_thread(tmp_path, toy_data_dir, monkeypatch,
                                                                          slow_validation):
    """A HeapTrimmer is not thread-safe (a trim between another call's two reads of its baseline fails it): the
    validation thread trims with its translator's own."""
    from nmt import train as train_module

    threads = []
    monkeypatch.setattr(train_module, "heap_trimmer_for", lambda device: lambda force=False: threads.append(
        threading.current_thread() is threading.main_thread()) or False)
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={**SETTINGS, "eval_in_background": True}))
    train(cfg, tmp_path / "run", toy_data_dir, log=lambda *_: None)
    assert sum(bool(r.get("background")) for r in valid_records(tmp_path / "run")) == 3
    assert threads and all(threads)
