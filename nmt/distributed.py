"""torchrun integration: one process group that serves CPU and CUDA tensors (gloo for CPU, NCCL for CUDA)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.distributed as dist

from nmt.errors import NMTError

# NCCL only moves CUDA tensors; the small control values (early-stop and non-finite flags, RNG states) live on the
# CPU. A process group with a backend per device type serves both, so no collective can meet a device its backend
# lacks ("No backend type associated with device type cpu" under plain NCCL).
CUDA_BACKEND = "cpu:gloo,cuda:nccl"
CPU_BACKEND = "gloo"
LAUNCH_ADVICE = ("start distributed training with torchrun (torchrun --nproc_per_node=N -m nmt train ...), "
                 "or unset WORLD_SIZE to train in one process")


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def broadcast_flag(self, flag: bool) -> bool:
        """Rank 0's decision (e.g. early stopping) for every rank."""
        if not self.enabled:
            return flag
        tensor = torch.tensor([int(flag)])  # CPU: served by gloo in every process group we create
        dist.broadcast(tensor, src=0)
        return bool(tensor.item())

    def max_over_ranks(self, *values: float) -> tuple[float, ...]:
        """Each value's maximum over the ranks (flags as 0/1, a clock's seconds): one collective for all of them."""
        if not self.enabled:
            return tuple(values)
        tensor = torch.tensor(values, dtype=torch.float64)  # CPU: served by gloo in every process group we create
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tuple(tensor.tolist())

    def gather_to_main(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj` on rank 0 (in rank order), None elsewhere; e.g. per-rank RNG states."""
        if not self.enabled:
            return [obj]
        gathered = [None] * self.world_size if self.is_main else None
        dist.gather_object(obj, gathered, dst=0)
        return gathered


def _whole_number(environ: Mapping[str, str], name: str, default: str) -> int:
    value = environ.get(name, default)
    if not value.isdigit():  # "-1", "x", "": nothing torchrun writes
        raise NMTError(f"{name}={value!r} is not a whole number: {LAUNCH_ADVICE}")
    return int(value)


def torchrun_layout(environ: Mapping[str, str]) -> DistContext:
    """This process's place among the ranks, as torchrun writes it into the environment; a lone process when
    WORLD_SIZE is unset or 1. A WORLD_SIZE left over from another launcher (a cluster job's environment, a shell
    that exported it) without the rest would otherwise surface as a KeyError, or as env:// rendezvous' own error."""
    world_size = _whole_number(environ, "WORLD_SIZE", "1")
    if world_size <= 1:
        return DistContext()
    missing = [name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not environ.get(name)]
    if missing:
        raise NMTError(f"WORLD_SIZE={world_size} without {', '.join(missing)}: {LAUNCH_ADVICE}")
    rank, local_rank = _whole_number(environ, "RANK", ""), _whole_number(environ, "LOCAL_RANK", "0")
    if rank >= world_size:
        raise NMTError(f"RANK={rank} is not below WORLD_SIZE={world_size}: {LAUNCH_ADVICE}")
    return DistContext(rank, world_size, local_rank)


def setup_distributed(requested_device: str) -> DistContext:
    """Join the process group torchrun describes in the environment; single process otherwise."""
    ctx = torchrun_layout(os.environ)
    if not ctx.enabled:
        return ctx
    use_cuda = requested_device != "cpu" and torch.cuda.is_available()
    if use_cuda:
        if ctx.local_rank >= torch.cuda.device_count():
            raise NMTError(f"LOCAL_RANK={ctx.local_rank} names a GPU this machine lacks (it has "
                           f"{torch.cuda.device_count()}): start at most that many processes per machine "
                           f"(torchrun --nproc_per_node)")
        torch.cuda.set_device(ctx.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(CUDA_BACKEND if use_cuda else CPU_BACKEND)
    return ctx


def teardown_distributed(ctx: DistContext) -> None:
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()
