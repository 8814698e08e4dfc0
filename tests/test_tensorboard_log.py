"""train.tensorboard: the metrics as TensorBoard scalars, rewritten from metrics.jsonl at every session's start."""

import importlib.util
import time

import pytest
import torch

from nmt.config import load_config
from nmt.errors import NMTError
from nmt.run_dir import Run
from nmt.tensorboard_log import scalars
from nmt.train import train
from tests_helpers import TOY_RUN, write_config

pytest.importorskip("tensorboard", reason="train.tensorboard writes with the tensorboard package (nmt[tensorboard])")


def event_scalars(directory) -> dict[str, list[tuple[int, float]]]:
    """What TensorBoard itself reads from the run's event files: {tag: [(step, value), ...]} in file order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def as_float32(value: float) -> float:
    return torch.tensor(value, dtype=torch.float32).item()  # event files hold float32s


def test_scalars_are_the_numbers_of_train_and_valid_records():
    assert scalars({"type": "train", "step": 7, "epoch": 1, "loss": 2.5, "lr": 1e-3}) == [
        ("train/epoch", 1.0), ("train/loss", 2.5), ("train/lr", 1e-3)]
    valid = {"type": "valid", "step": 5, "dev_bleu": 12.3, "best_metric": "bleu", "background": True}
    assert scalars(valid) == [("valid/dev_bleu", 12.3)]  # no names, no flags
    assert scalars({"type": "start", "step": 0, "setup_s": 3.2}) == []
    assert scalars({"type": "checkpoint", "step": 4, "waited_s": 0.1}) == []


def toy_config(tmp_path, **train_settings):
    settings = {"max_steps": 10, "save_every": 4, "eval_every": 5, "log_every": 1, **train_settings}
    return load_config(write_config(tmp_path, base=TOY_RUN, train=settings))


def assert_mirrors_the_metrics(run: Run) -> None:
    """The event files hold each train and valid record of metrics.jsonl once, at its step, in order."""
    seen = event_scalars(run.tensorboard_path)
    for kind, key in (("train", "loss"), ("train", "lr"), ("train", "tokens_per_s"), ("valid", "dev_bleu"),
                      ("valid", "dev_loss")):
        expected = [(r["step"], as_float32(r[key])) for r in run.metrics.records() if r["type"] == kind]
        assert seen[f"{kind}/{key}"] == expected, key


def test_training_writes_every_record_as_scalars(tmp_path, toy_data_dir):
    run = Run(tmp_path / "run")
    train(toy_config(tmp_path, tensorboard=True), run.directory, toy_data_dir, log=lambda *_: None)
    assert_mirrors_the_metrics(run)
    assert [step for step, _ in event_scalars(run.tensorboard_path)["train/loss"]] == list(range(1, 11))
    assert [step for step, _ in event_scalars(run.tensorboard_path)["valid/dev_bleu"]] == [5, 10]


def test_a_resume_rewrites_the_events_from_the_trimmed_metrics(tmp_path, toy_data_dir):
    """Turned on when a run resumes after a crash: the steps before it are there, the steps of the crashed session
    past its last checkpoint are not there twice, and no older event file remains beside the new one."""
    run = Run(tmp_path / "run")
    train(toy_config(tmp_path), run.directory, toy_data_dir, log=lambda *_: None)
    assert not run.tensorboard_path.exists()  # off by default
    # A kill -9 after steps 9-10 were logged, as if the step-10 save had not landed (test_end_to_end does the same).
    state = run.load(run.checkpoint_path("last"))
    state["progress"]["step"], state["progress"]["batch_in_epoch"] = 8, 8
    torch.save(state, run.checkpoint_path("last"))
    run.tensorboard_path.mkdir()
    stale = run.tensorboard_path / "events.out.tfevents.1.host.1.0"
    stale.write_bytes(b"")  # an earlier session's file: rewritten, so it goes
    train(toy_config(tmp_path, tensorboard=True), run.directory, toy_data_dir, log=lambda *_: None)
    assert not stale.exists() and len(list(run.tensorboard_path.iterdir())) == 1
    assert [step for step, _ in event_scalars(run.tensorboard_path)["train/loss"]] == list(range(1, 11))
    assert_mirrors_the_metrics(run)


def event_wall_times(directory, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    events.Reload()
    return [(e.step, e.wall_time) for e in events.Scalars(tag)]


def test_replayed_records_keep_the_time_they_were_made(tmp_path, toy_data_dir):
    """TensorBoard's wall and relative axes: a record rewritten at a later session's start is shown at the time
    metrics.jsonl says it was made, not at the rewrite (which put a whole first session at one instant)."""
    run = Run(tmp_path / "run")
    train(toy_config(tmp_path, max_steps=6), run.directory, toy_data_dir, log=lambda *_: None)
    first = [r for r in run.metrics.records() if r["type"] == "train"]
    assert [r["step"] for r in first] == [1, 2, 3, 4, 5, 6] and all(isinstance(r["wall_time"], float) for r in first)
    assert [r["wall_time"] for r in first] == sorted(r["wall_time"] for r in first)
    time.sleep(1.5)
    resumed_at = time.time()
    train(toy_config(tmp_path, max_steps=10, tensorboard=True), run.directory, toy_data_dir, log=lambda *_: None)
    shown = dict(event_wall_times(run.tensorboard_path, "train/loss"))
    assert sorted(shown) == list(range(1, 11))
    for record in first:
        assert shown[record["step"]] == pytest.approx(record["wall_time"], abs=1e-3), record["step"]
        assert shown[record["step"]] < resumed_at
    assert all(resumed_at <= shown[step] <= time.time() for step in range(7, 11))
    assert "train/wall_time" not in event_scalars(run.tensorboard_path)  # an axis, not a curve


def test_a_missing_package_is_refused_before_the_corpus_is_prepared(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "tensorboard" else find_spec(name, *rest))
    data_dir = tmp_path / "data"
    with pytest.raises(NMTError, match=r"train.tensorboard needs the tensorboard package: pip install "
                                       r"'nmt\[tensorboard\]'"):
        train(toy_config(tmp_path, tensorboard=True), tmp_path / "run", data_dir, url=str(tmp_path / "none.zip"))
    assert not data_dir.exists()
