"""torchrun integration without GPUs: the collectives must only meet devices their backend serves."""

import re

import pytest
import torch
import torch.distributed as dist

from nmt import distributed
from nmt.distributed import DistContext, setup_distributed, torchrun_layout
from nmt.errors import NMTError
from tests_helpers import nmt, write_config


def backend_device_types(backend: str) -> set[str]:
    """Device types a backend string serves (torch.distributed's rules): NCCL moves CUDA tensors only."""
    if ":" in backend:
        return {part.split(":")[0].strip() for part in backend.split(",")}
    return {"nccl": {"cuda"}, "gloo": {"cpu", "cuda"}}.get(backend, set())


@pytest.fixture
def fake_cuda_rank(monkeypatch):
    """Rank 0 of 2 on a machine that claims CUDA: records the backend asked for and every collective's device."""
    seen = {"backend": None, "devices": []}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: None)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: seen.update(backend=backend))

    def collective(tensor, *args, **kwargs):
        seen["devices"].append(tensor.device.type)

    monkeypatch.setattr(dist, "all_reduce", collective)
    monkeypatch.setattr(dist, "broadcast", collective)
    return seen


def test_flags_under_a_cuda_process_group_use_a_device_its_backend_serves(fake_cuda_rank):
    """Plain NCCL with CPU flag tensors crashes at step 1 ("No backend type associated with device type cpu")."""
    ctx = setup_distributed("auto")
    assert ctx.enabled and ctx.world_size == 2
    ctx.max_over_ranks(0.0, 1.0)  # a stop request and a clock, as training sends them
    ctx.broadcast_flag(True)
    served = backend_device_types(fake_cuda_rank["backend"])
    assert fake_cuda_rank["devices"], "no collective ran"
    assert set(fake_cuda_rank["devices"]) <= served, (fake_cuda_rank["backend"], fake_cuda_rank["devices"])
    assert "cuda" in served, "CUDA tensors (DDP gradients) must still go through NCCL"


def test_backend_device_types():
    assert backend_device_types("nccl") == {"cuda"}
    assert backend_device_types("cpu:gloo,cuda:nccl") == {"cpu", "cuda"}
    assert backend_device_types(distributed.CPU_BACKEND) >= {"cpu"}


def test_single_process_needs_no_process_group():
    ctx = DistContext()
    assert ctx.max_over_ranks(1.0, 0.0) == (1.0, 0.0) and ctx.broadcast_flag(True) is True
    assert ctx.gather_to_main({"a": 1}) == [{"a": 1}]


def _gloo_worker(rank, world, port, results):
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ctx = DistContext(rank, world, rank)
    flags = ctx.max_over_ranks(float(rank == 1), 0.0)
    clock = ctx.max_over_ranks(float(rank == 0), 100.25 + rank)  # the trainer's stop flag and training seconds
    gathered = ctx.gather_to_main({"rank": rank})
    results.put((rank, (flags, clock), gathered))
    dist.destroy_process_group()


def test_flags_and_gather_over_two_real_processes():
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_gloo_worker, args=(r, 2, port, results)) for r in range(2)]
    for p in procs:
        p.start()
    out = dict((rank, (flags, gathered)) for rank, flags, gathered in (results.get(timeout=120) for _ in procs))
    for p in procs:
        p.join(timeout=60)
    assert out[0][0][0] == out[1][0][0] == (1.0, 0.0)  # rank 1's flag reaches rank 0
    # every rank reads the same clock (so the same time-budgeted lr): the one that reads the most seconds
    assert out[0][0][1] == out[1][0][1] == (1.0, 101.25)
    assert out[0][1] == [{"rank": 0}, {"rank": 1}] and out[1][1] is None


def test_trainer_reads_the_agreed_clock_under_torchrun_and_its_own_alone():
    """The time budget's stop and a time-budgeted lr read one clock: under torchrun the most seconds any rank read at
    the last agreement (every log_every updates), so that every replica applies the same lr; alone, its own."""
    from types import SimpleNamespace

    from nmt.optim import TrainingClock
    from nmt.train import Trainer

    class Ranks:
        enabled = True

        def max_over_ranks(self, *values):
            return values[0], 420.5  # another rank has read more seconds

    trainer = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(time_budget_s=420.0)), ctx=Ranks(),
                              progress=SimpleNamespace(elapsed_s=400.0), clock=TrainingClock(100.0))
    assert Trainer._agreed_flags(trainer, stop_requested=False, agree_now=False) == (False, False)
    assert trainer.clock.elapsed_s == 100.0  # between agreements the clock stands still
    assert Trainer._agreed_flags(trainer, stop_requested=False, agree_now=True) == (False, True)
    assert trainer.clock.elapsed_s == 420.5
    trainer.ctx = DistContext()
    assert Trainer._agreed_flags(trainer, stop_requested=True, agree_now=False) == (True, False)
    assert trainer.clock.elapsed_s == 400.0


def test_a_rank_that_logs_nothing_still_lets_go_of_each_windows_phase_timings():
    """Only rank 0 writes train records, but every rank's StepTimer collects each update's phases (CUDA events on a
    GPU): a rank that never read them kept them all, a list growing by five entries an update for the whole run."""
    from types import SimpleNamespace

    import torch

    from nmt.throughput import StepTimer, ThroughputWindow
    from nmt.train import Trainer

    records = []
    trainer = SimpleNamespace(cfg=SimpleNamespace(train=SimpleNamespace(time_budget_s=0.0)),
                              ctx=SimpleNamespace(is_main=False, world_size=2), progress=SimpleNamespace(step=3),
                              optimizer=SimpleNamespace(param_groups=[{"lr": 1e-3}]),
                              timer=StepTimer(torch.device("cpu")), log=records.append, record=records.append)
    window = ThroughputWindow(peak_flops=1e12)
    for _ in range(3):
        for phase in ("data", "forward", "backward", "optimizer"):
            trainer.timer.phase(phase)
        trainer.timer.phase(None)
        window.add(torch.tensor(2.0), 10, 10, 1e6)
    bar = SimpleNamespace(set_postfix=lambda **_: None, disable=True)
    Trainer._log_train(trainer, bar, window)
    assert trainer.timer.pending == [] and records == []  # let go of, and nothing written by this rank
    assert trainer.timer.report()["forward_s"] == 0.0  # the next window starts from nothing


@pytest.mark.parametrize("environ, said", [
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE=2 without RANK, MASTER_ADDR, MASTER_PORT"),
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not a whole number"),
    ({"WORLD_SIZE": "2", "RANK": "-1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK='-1' is not a whole number"),
    ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK=2 is not below WORLD_SIZE=2"),
    ({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "x", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
     "LOCAL_RANK='x' is not a whole number"),
], ids=["no-rank", "not-a-number", "negative-rank", "rank-too-high", "local-rank"])
def test_a_broken_torchrun_environment_is_named(environ, said):
    """A WORLD_SIZE left in the environment by another launcher was "internal error KeyError: 'RANK'"."""
    with pytest.raises(NMTError, match=re.escape(said) + ".*torchrun --nproc_per_node"):
        torchrun_layout(environ)


def test_the_torchrun_layout_as_torchrun_writes_it():
    assert torchrun_layout({}) == DistContext() and torchrun_layout({"WORLD_SIZE": "1"}) == DistContext()
    written = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}
    assert torchrun_layout(written) == DistContext(rank=3, world_size=4, local_rank=1)


def test_training_under_a_stray_world_size_says_what_to_do(tmp_path, toy_data_dir, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    for name in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    config = write_config(tmp_path, train={"max_steps": 1, "warmup_steps": 1})
    result = nmt("train", "--config", config, "--run-dir", tmp_path / "run", data_dir=toy_data_dir)
    assert result.returncode == 2 and result.stderr.startswith("error: WORLD_SIZE=2 without RANK"), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "run").exists()
