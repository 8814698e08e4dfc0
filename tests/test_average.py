"""`nmt average` beside a training that goes on saving: its rotation (train.keep_last) removes the oldest step
checkpoint at every save, between the averaging's listing and its reads."""

import shutil

import pytest
import torch

from nmt.average import average_checkpoints
from nmt.config import load_config
from nmt.errors import NMTError
from nmt.run_dir import Run
from nmt.train import train
from tests_helpers import TOY_RUN, write_config

pytestmark = pytest.mark.slow  # trains a toy run


@pytest.fixture
def run(tmp_path, toy_data_dir) -> Run:
    run = Run(tmp_path / "run")
    config = load_config(write_config(tmp_path, base=TOY_RUN, train={"max_steps": 12, "save_every": 4,
                                                                        "keep_last": 3}))
    train(config, run.directory, toy_data_dir, log=lambda *_: None)
    assert [p.name for p in run.step_checkpoints()] == ["step-0000004.pt", "step-0000008.pt", "step-0000012.pt"]
    return run


def mean_of(run: Run, names: list[str]) -> dict[str, torch.Tensor]:
    weights = [run.load(run.checkpoint_dir / name)["model"] for name in names]
    return {key: sum(w[key].double() for w in weights) / len(weights) for key in weights[0]}


def assert_averaged(run: Run, expected: dict[str, torch.Tensor]) -> None:
    averaged = run.load(run.checkpoint_path("averaged"))["model"]
    for key, value in expected.items():
        torch.testing.assert_close(averaged[key], value.to(averaged[key].dtype))


def test_a_checkpoint_the_rotation_removes_while_the_average_reads_is_still_read(run, monkeypatch):
    """A save beside the averaging removes step 4 after every file was listed and opened: it is averaged anyway."""
    expected = mean_of(run, ["step-0000004.pt", "step-0000008.pt", "step-0000012.pt"])
    load_weights = Run.load_weights

    def rotate_then_load(self, *path_and_handle):
        for old in self.step_checkpoints():
            old.unlink()  # as many saves as it takes to rotate every listed file out
        return load_weights(self, *path_and_handle)

    monkeypatch.setattr(Run, "load_weights", rotate_then_load)
    path, inputs = average_checkpoints(run, 3)
    assert [p.name for p in inputs] == ["step-0000004.pt", "step-0000008.pt", "step-0000012.pt"]
    monkeypatch.undo()
    assert path == run.checkpoint_path("averaged")
    assert_averaged(run, expected)


def test_a_checkpoint_removed_between_the_listing_and_its_opening_makes_a_new_listing(run, monkeypatch):
    """A save lands between the listing and the opening: step 16 is written, step 4 removed; the newest three then."""
    listing = Run.step_checkpoints
    saves = []

    def listed_then_a_save(self):
        paths = listing(self)
        if not saves:
            saves.append(shutil.copy(paths[-1], self.checkpoint_dir / "step-0000016.pt"))
            paths[0].unlink()
        return paths

    monkeypatch.setattr(Run, "step_checkpoints", listed_then_a_save)
    _, inputs = average_checkpoints(run, 3)
    monkeypatch.undo()
    assert [p.name for p in inputs] == ["step-0000008.pt", "step-0000012.pt", "step-0000016.pt"]
    assert_averaged(run, mean_of(run, ["step-0000008.pt", "step-0000012.pt", "step-0000016.pt"]))


def test_a_listing_that_never_holds_still_is_one_line_and_writes_nothing(run, monkeypatch):
    monkeypatch.setattr(Run, "step_checkpoints", lambda self: [self.checkpoint_dir / "step-0000099.pt"])
    with pytest.raises(NMTError, match=r"^the step checkpoints of .* were replaced 5 times while being opened"):
        average_checkpoints(run, 3)
    assert not run.checkpoint_path("averaged").exists()
