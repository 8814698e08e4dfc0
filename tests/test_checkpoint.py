import random
import time

import numpy as np
import pytest
import torch

from nmt.checkpoint import (BackgroundWriter, capture_rng_state, load_checkpoint, restore_rng_state, save_checkpoint,
                            snapshot)
from nmt.errors import NMTError


def draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_rng_state_round_trips_every_generator(tmp_path):
    state = capture_rng_state(torch.device("cpu"))
    save_checkpoint({"rng": state}, tmp_path / "c.pt")
    first = draws()
    restore_rng_state(load_checkpoint(tmp_path / "c.pt")["rng"], torch.device("cpu"))
    assert draws() == first


def test_failed_save_keeps_the_previous_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint({"a": torch.ones(2)}, path)
    with pytest.raises(Exception):
        save_checkpoint({"a": lambda: None}, path)  # not serializable
    assert torch.equal(load_checkpoint(path)["a"], torch.ones(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


class Evil:
    """Any pickled object: weights_only=True must refuse to build it."""


def test_pickled_objects_are_refused(tmp_path):
    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(NMTError, match="cannot read checkpoint"):
        load_checkpoint(tmp_path / "evil.pt")


def test_a_flipped_byte_is_detected_not_loaded(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint({"model": {"w": torch.randn(300, 300)}, "step": 3}, path)
    assert load_checkpoint(path)["step"] == 3
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # inside the tensor data: torch.load alone would load it silently
    path.write_bytes(bytes(blob))
    with pytest.raises(NMTError, match="is corrupt"):
        load_checkpoint(path)


def test_checkpoints_without_a_checksum_still_load(tmp_path):
    torch.save({"model": {"w": torch.ones(2)}}, tmp_path / "old.pt")
    assert torch.equal(load_checkpoint(tmp_path / "old.pt")["model"]["w"], torch.ones(2))


def test_snapshot_is_not_changed_by_training_going_on():
    weights = {"w": torch.ones(3), "nested": [torch.zeros(2), 5]}
    copy = snapshot(weights)
    weights["w"].add_(1)
    weights["nested"][0].fill_(7)
    assert torch.equal(copy["w"], torch.ones(3)) and torch.equal(copy["nested"][0], torch.zeros(2))
    assert copy["nested"][1] == 5


def test_background_writer_runs_in_order_and_raises_in_the_caller():
    writer, done = BackgroundWriter(), []
    writer.submit(lambda: (time.sleep(0.05), done.append(1)))
    writer.submit(lambda: done.append(2))  # waits for the first
    writer.wait()
    assert done == [1, 2] and writer.last_seconds is not None

    def fail():
        raise NMTError("cannot write checkpoint x (is the disk full?)")
    writer.submit(fail)
    with pytest.raises(NMTError, match="disk full"):
        writer.wait()
    writer.wait()  # the error is raised once
