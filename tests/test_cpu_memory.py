"""A CPU training process's memory kept flat: freed heap pages handed back, oneDNN's kernel cache bounded."""

import ctypes
import os

import pytest
import torch

from nmt import cpu_memory
from nmt.config import load_config
from nmt.cpu_memory import HeapTrimmer, heap_trimmer_for, limit_onednn_cache, resident_bytes
from nmt.translator import Translator
from tests_helpers import TOY_RUN, write_config

MIB = 2**20


def test_the_trimmer_trims_only_past_one_working_set_plus_the_slack(monkeypatch):
    resident, trims = [1000 * MIB], []
    monkeypatch.setattr(cpu_memory, "resident_bytes", lambda: resident[0])
    trimmer = HeapTrimmer(slack_bytes=100 * MIB)
    trimmer.malloc_trim = lambda pad: trims.append(pad) or 1

    def after_update(mib):
        resident[0] = mib * MIB
        return trimmer()

    assert not after_update(1500)  # the first update: its working set sets the baseline
    assert not after_update(1600)  # grown by the slack, not past it
    assert after_update(1601) and trims == [0] and trimmer.trims == 1
    assert not after_update(1700)  # the first update after a trim sets the baseline again
    assert not after_update(1790)
    assert after_update(1801) and trimmer.trims == 2
    assert trimmer(force=True) and trimmer.trims == 3  # before validation: whatever the growth


def test_the_trimmer_does_nothing_where_it_cannot_trim(monkeypatch):
    monkeypatch.setattr(cpu_memory, "_glibc_malloc_trim", lambda: None)
    trimmer = HeapTrimmer()
    assert not trimmer() and not trimmer(force=True) and trimmer.trims == 0


@pytest.mark.skipif(cpu_memory._glibc_malloc_trim() is None or resident_bytes() is None,
                    reason="needs Linux with glibc")
def test_freed_heap_pages_go_back_to_the_os():
    """What glibc does to training's activations, and what trimming undoes: blocks freed in the middle of the heap
    stay resident until malloc_trim hands their pages back."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(8 * MIB))  # a freed mmapped block raises the mmap threshold: 1 MiB blocks use the heap
    blocks = [libc.malloc(MIB) for _ in range(320)]
    for block in blocks:
        ctypes.memset(block, 1, MIB)  # resident
    for block in blocks[::2]:  # every other one: each freed block lies between live ones, so none joins the top
        libc.free(block)
    held = resident_bytes()
    trimmer = HeapTrimmer()
    assert trimmer(force=True)
    released = held - resident_bytes()
    for block in blocks[1::2]:
        libc.free(block)
    assert released > 100 * MIB, f"only {released / MIB:.0f} MiB of 160 went back"


def test_oneDNN_cache_is_bounded_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    limit_onednn_cache(16)
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "16"
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1024")
    limit_onednn_cache(16)
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "1024"


@pytest.mark.parametrize("configured", [None, 1024])
def test_a_cpu_trainer_bounds_oneDNN_cache_as_its_config_says(tmp_path, toy_data_dir, monkeypatch, configured):
    from nmt.config import TrainConfig
    from nmt.run_dir import Run
    from nmt.train import Trainer

    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    cfg = load_config(write_config(tmp_path, "toy", base=TOY_RUN,
                                   train={} if configured is None else {"onednn_cache": configured}))
    Trainer(cfg, Run(tmp_path / "run"), toy_data_dir, log=lambda *_: None)
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(configured or TrainConfig().onednn_cache)


def test_work_on_the_cpu_gets_a_trimmer_and_elsewhere_a_no_op():
    assert isinstance(heap_trimmer_for(torch.device("cpu")), HeapTrimmer)
    elsewhere = heap_trimmer_for(torch.device("meta"))  # an accelerator's memory is not the host heap
    assert not elsewhere() and not elsewhere(force=True)


def test_the_translator_trims_after_each_batch(toy_transformer_run):
    translator = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"batch_size": 2})
    calls = []
    translator.trim_heap = lambda force=False: calls.append(force) or False
    results = translator.translate(["I have two cats.", "", "Hello.", "We are here.", "Go.", "Tom left."])
    assert len(results) == 6 and results[1].text == ""
    assert calls == [False, False, False]  # five sentences to decode, two a batch: three batches


@pytest.mark.slow
def test_validation_trims_between_its_loss_batches(tmp_path, toy_data_dir, monkeypatch):
    """The dev-loss pass meets a batch shape per batch, as training does: the trainer's trimmer sees each one."""
    from nmt import train as train_module
    from nmt.train import Trainer, train

    in_validation, trims, losses = [False], [], []
    monkeypatch.setattr(train_module, "heap_trimmer_for",
                        lambda device: lambda force=False: trims.append((in_validation[0], force)) or False)
    validate, token_loss = Trainer.validate, Trainer.token_loss

    def spy_validate(self):
        in_validation[0] = True
        try:
            return validate(self)
        finally:
            in_validation[0] = False

    def spy_token_loss(self, *args):
        losses.append(in_validation[0])
        return token_loss(self, *args)

    monkeypatch.setattr(Trainer, "validate", spy_validate)
    monkeypatch.setattr(Trainer, "token_loss", spy_token_loss)
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={"max_steps": 4, "eval_every": 4, "max_tokens": 100}))
    train(cfg, tmp_path / "run", toy_data_dir, log=lambda *_: None)
    loss_batches = sum(losses)
    assert loss_batches >= 2
    assert trims.count((True, False)) == loss_batches
    assert trims.count((False, True)) == 2  # forced around validation
    assert trims.count((False, False)) == 4  # one per update
