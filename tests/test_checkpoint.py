import pickle
import random
import time

import numpy as np
import pytest
import torch

from nmt.checkpoint import (BackgroundWriter, capture_rng_state, load_checkpoint, peek_checkpoint, restore_rng_state,
                            save_checkpoint, snapshot)
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


def test_pickled_objects_are_refused_without_advising_to_trust_them(tmp_path):
    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(NMTError, match=r"cannot read checkpoint .*evil.pt: it holds Python objects besides tensors "
                       r"and plain values, which nmt never loads") as caught:
        load_checkpoint(tmp_path / "evil.pt")
    assert "weights_only=False" not in str(caught.value)  # torch's own advice: load it trusting its code


@pytest.mark.parametrize("content,reason", [
    ("truncated", r"the file is damaged or truncated \([^\n]+\)$"),
    ("text", r"not a PyTorch checkpoint \(torch.save writes a zip archive\)$"),
    ("pickle", r"not a PyTorch checkpoint"),
])
def test_a_file_torch_cannot_read_says_what_it_is(tmp_path, content, reason):
    path = tmp_path / "c.pt"
    if content == "truncated":
        save_checkpoint({"model": {"w": torch.randn(100, 100)}}, path)
        path.write_bytes(path.read_bytes()[:20000])
    elif content == "text":
        path.write_text("model: {arch: transformer}\n")  # e.g. config.yaml passed as --checkpoint
    else:
        path.write_bytes(pickle.dumps({"model": {}}, protocol=4))
    with pytest.raises(NMTError, match=f"^cannot read checkpoint {path}: {reason}") as caught:
        load_checkpoint(path)
    assert "\n" not in str(caught.value)


def test_a_flipped_byte_is_detected_not_loaded(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint({"model": {"w": torch.randn(300, 300)}, "step": 3}, path)
    assert load_checkpoint(path)["step"] == 3
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # inside the tensor data: torch.load alone would load it silently
    path.write_bytes(bytes(blob))
    with pytest.raises(NMTError, match="is corrupt"):
        load_checkpoint(path)


def test_a_peek_reads_the_plain_values_and_neither_reads_nor_verifies_the_tensors(tmp_path):
    """What translate and resume read of a checkpoint only to learn its step or config (last.pt of
    transformer.yaml: 612 MB, read and hashed in ~1 s): the file mapped, not read, and not verified; so a flipped
    byte in the tensor data goes unnoticed here, and load_checkpoint, which gives the weights to use, refuses it."""
    path = tmp_path / "c.pt"
    save_checkpoint({"model": {"w": torch.randn(300, 300)}, "progress": {"step": 7}}, path)
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))
    peeked = peek_checkpoint(path)
    assert peeked["progress"] == {"step": 7} and peeked["model"]["w"].shape == (300, 300)
    with pytest.raises(NMTError, match="is corrupt"):
        load_checkpoint(path)
    for broken, message in ((tmp_path / "none.pt", "checkpoint not found"), (tmp_path / "empty.pt", "file is empty"),
                            (tmp_path / "text.pt", "not a PyTorch checkpoint")):
        if broken.name != "none.pt":
            broken.write_text("" if broken.name == "empty.pt" else "model: {}\n")
        with pytest.raises(NMTError, match=message):
            peek_checkpoint(broken)


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
