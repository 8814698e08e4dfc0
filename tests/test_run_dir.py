"""The run directory: layout, checkpoint loading errors, metrics log, lock, and runs written by older versions."""

import json
import os
from pathlib import Path

import pytest
import torch
import yaml

from nmt.config import Config, load_config
from nmt.errors import NMTError
from nmt.run_dir import Run
from nmt.run_logs import MetricsLog
from nmt.train import train
from tests_helpers import TOY_RUN, nmt, write_config

# What nmt 0.1.0 as first released (commit 0920a04) wrote: output projection under `out`, no model_args,
# one RNG dict, progress without elapsed time, configs without the fields added since.
LEGACY_RENAMES = {"head.proj.weight": "out.weight"}
NEW_FIELDS = {"data": ("max_pieces",), "model": ("max_positions",), "train": ("peak_tflops",)}


def make_legacy(run: Run) -> None:
    for which in ("last", "best"):
        path = run.checkpoint_path(which)
        state = torch.load(path, weights_only=True)
        state.pop("content_sha256")  # checksums came later
        state["model"] = {LEGACY_RENAMES.get(k, k): v for k, v in state["model"].items()}
        state.pop("model_args")
        for section, names in NEW_FIELDS.items():
            for name in names:
                state["config"][section].pop(name)
        if which == "last":
            state["rng"] = state["rng"][0]
            state["progress"].pop("elapsed_s")
        torch.save(state, path)
    config = yaml.safe_load(run.config_path.read_text())
    for section, names in NEW_FIELDS.items():
        for name in names:
            config[section].pop(name)
    run.config_path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture
def toy_run(tmp_path, toy_data_dir) -> Run:
    run = Run(tmp_path / "run")
    train(load_config(write_config(tmp_path, base=TOY_RUN, train={"max_steps": 20})), run.directory, toy_data_dir,
          log=lambda *_: None)
    return run


@pytest.mark.slow
def test_run_written_by_the_first_release_translates_and_resumes(tmp_path, toy_run, toy_data_dir):
    before = nmt("translate", "--run", toy_run.directory, "--beam", "1", "I have two cats.", "We have six keys.")
    make_legacy(toy_run)
    assert "out.weight" in torch.load(toy_run.checkpoint_path("best"), weights_only=True)["model"]
    after = nmt("translate", "--run", toy_run.directory, "--beam", "1", "I have two cats.", "We have six keys.")
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={"max_steps": 24}))
    messages = []
    assert train(cfg, toy_run.directory, toy_data_dir, log=messages.append).step == 24
    assert f"resuming {toy_run.directory} from step 20" in messages


def test_paths_and_default_root(tmp_path):
    assert Run.for_config(Config(name="demo")).directory == Path("runs") / "demo"
    assert Run.for_config(Config(name="demo"), tmp_path).directory == tmp_path
    run = Run(tmp_path)
    assert run.checkpoint_path("best") == tmp_path / "checkpoints" / "best.pt"
    assert run.metrics.path == tmp_path / "metrics.jsonl" and run.eval_dir == tmp_path / "eval"


def test_a_checkpoint_is_named_by_its_name_within_the_run(tmp_path, monkeypatch):
    """`--checkpoint last` was "checkpoint not found: last": a bare name is one of the run's checkpoints."""
    root = tmp_path / "runs"
    for name, saved in (("older", ("best", "last")), ("newer", ("best", "last", "step-200"))):
        run = Run(root / name)
        run.checkpoint_dir.mkdir(parents=True)
        run.config_path.write_text("name: x\n")
        for stem in saved:
            (run.checkpoint_dir / f"{stem}.pt").write_bytes(b"weights")
    older, newer = Run(root / "older"), Run(root / "newer")
    monkeypatch.chdir(tmp_path)
    assert older.find_checkpoint(Path("last")) == (older.checkpoint_dir / "last.pt", None)
    assert newer.find_checkpoint(Path("step-200")) == (newer.checkpoint_dir / "step-200.pt", None)
    assert Run.of_checkpoint(older.directory, Path("last")) == older  # the named run, not a file "last" here
    for run, when in ((older, 1_000_000), (newer, 2_000_000)):
        for path in run.checkpoint_dir.glob("*.pt"):
            os.utime(path, (when, when))
    assert Run.of_checkpoint(None, Path("best")).directory.resolve() == newer.directory  # no --run: the newest
    with pytest.raises(NMTError, match=r"older has no checkpoint named step-200 \(it has: best, last\)$"):
        older.find_checkpoint(Path("step-200"))
    # A file of that name here is a file (and not in a run's checkpoints/ folder).
    Path("last").write_bytes(b"weights")
    with pytest.raises(NMTError, match="is not in a run's checkpoints/ folder"):
        Run.of_checkpoint(None, Path("last"))
    assert older.find_checkpoint(Path("last")) == (Path("last"), None)


@pytest.mark.parametrize("content,message", [
    (b"", "the file is empty"),
    (b"not a checkpoint", "cannot read checkpoint"),  # the reason: tests/test_checkpoint.py
    ("list", "is not an nmt checkpoint (holds a list)"),
    ("no-config", "missing config"),
])
def test_foreign_checkpoints_are_one_line_errors(toy_run, content, message):
    path = toy_run.checkpoint_path("best")
    if content == "list":
        torch.save([1, 2], path)
    elif content == "no-config":
        state = torch.load(path, weights_only=True)
        del state["config"], state["content_sha256"]
        torch.save(state, path)
    else:
        path.write_bytes(content)
    result = nmt("translate", "--run", toy_run.directory, "hello")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and str(path) in result.stderr


def test_best_copied_over_last_cannot_resume(tmp_path, toy_run, toy_data_dir):
    toy_run.checkpoint_path("last").write_bytes(toy_run.checkpoint_path("best").read_bytes())
    with pytest.raises(NMTError, match="weights-only checkpoint such as best.pt cannot resume"):
        train(load_config(write_config(tmp_path, base=TOY_RUN)), toy_run.directory, toy_data_dir,
              log=lambda *_: None)


def test_metrics_log_skips_torn_lines_and_trims(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for step in (1, 2, 3):
        log.append({"type": "train", "step": step, "loss": 1.0})
        log.append({"type": "checkpoint", "step": step, "seconds": 0.1})
    with open(log.path, "a") as handle:  # lines of no record: edited by hand, another tool's, or torn
        handle.write('{"type": "train", "step": "4"}\n{"type": "valid", "step": true}\n[1]\n{"type": "valid", "st')
    assert [r["step"] for r in log.records()] == [1, 1, 2, 2, 3, 3]
    assert log.split() == ([r for r in log.records() if r["type"] == "train"], [])
    # A resume from step 2 keeps every record up to it, the checkpoint waits too
    assert log.trim_after(2) == 2
    assert [(json.loads(x)["type"], json.loads(x)["step"]) for x in log.path.read_text().splitlines()] == [
        ("train", 1), ("checkpoint", 1), ("train", 2), ("checkpoint", 2)]


def test_metrics_log_is_strict_json_a_non_finite_number_null(tmp_path):
    """A NaN dev loss (weights that overflow) or an infinite figure was written as NaN or Infinity, which Python
    reads but no strict JSON reader does (jq, JavaScript's JSON.parse, pandas' read_json with lines=True)."""
    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.append({"type": "valid", "step": 3, "dev_loss": float("nan"), "dev_ppl": float("inf"), "dev_bleu": 0.0,
                "timing": {"decode_s": float("-inf"), "spans": [1.5, float("nan")]}})
    line = log.path.read_text()
    assert "NaN" not in line and "Infinity" not in line
    assert json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line}")) == {
        "type": "valid", "step": 3, "dev_loss": None, "dev_ppl": None, "dev_bleu": 0.0,
        "timing": {"decode_s": None, "spans": [1.5, None]}}


def test_metrics_log_refuses_a_planted_link(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / "metrics.jsonl").symlink_to(target)
    with pytest.raises(NMTError, match="symbolic link"):
        MetricsLog(tmp_path / "metrics.jsonl").append({"type": "train", "step": 1})
    assert target.read_text() == "precious\n"


def test_a_config_kept_in_the_folder_named_as_the_run_is_never_written_over(tmp_path, toy_data_dir):
    # `nmt train -c exp/config.yaml --run-dir exp`: training wrote its resolved config over the user's own (its
    # comments gone, --set values in). A run's own config.yaml has env.json beside it; this one has not.
    experiment = tmp_path / "exp"
    experiment.mkdir()
    config = write_config(experiment, name="config", base=TOY_RUN, train={"max_steps": 2})
    mine = config.read_text() + "# why these settings: my notes\n"
    config.write_text(mine)
    assert config == experiment / "config.yaml"
    with pytest.raises(NMTError, match=r"config.yaml is not a run's \(no env.json beside it\), and training writes "):
        train(load_config(config), experiment, toy_data_dir, log=lambda *_: None)
    assert config.read_text() == mine and sorted(p.name for p in experiment.iterdir()) == ["config.yaml"]
    # A run's own config (env.json beside it) resumes as before: `nmt train -c runs/x/config.yaml --run-dir runs/x`.
    run = tmp_path / "run"
    train(load_config(config), run, toy_data_dir, log=lambda *_: None)
    again = train(load_config(run / "config.yaml"), run, toy_data_dir, log=lambda *_: None)
    assert again.step == 2
    # Translating in that folder says where to train it; its advice was the command now refused.
    with pytest.raises(NMTError, match=r"exp holds a config.yaml but no run \(no env.json\); train it into a folder "
                                       r"of its own: `nmt train --config .*exp/config.yaml --run-dir runs/NAME`$"):
        Run.open(experiment).find_checkpoint()


def test_the_newest_run_is_found_while_a_training_rotates_its_step_checkpoints(tmp_path, monkeypatch):
    """A step checkpoint listed and then removed by a training's rotation (train.keep_last) before its time was
    read was a FileNotFoundError of `nmt translate` without --run (11 of 48,243 lookups beside a training saving
    every 2 updates); the run that trains is still the newest, by its other saves."""
    older, training = tmp_path / "older" / "checkpoints", tmp_path / "training" / "checkpoints"
    for folder in (older, training):
        folder.mkdir(parents=True)
    (older / "best.pt").write_bytes(b"x")
    os.utime(older / "best.pt", (1_000, 1_000))
    (training / "last.pt").write_bytes(b"x")
    (training / "step-0000002.pt").write_bytes(b"x")
    stat = Path.stat

    def removed_after_listing(path, *args, **kwargs):
        if path.name == "step-0000002.pt":
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", removed_after_listing)
    assert Run.latest(tmp_path).directory == tmp_path / "training"
