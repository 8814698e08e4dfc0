"""torchrun integration: one process group that serves CPU and CUDA tensors (gloo for CPU, NCCL for CUDA)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

# NCCL only moves CUDA tensors; the small control values (early-stop and non-finite flags, RNG states) live on the
# CPU. A process group with a backend per device type serves both, so no collective can meet a device its backend
# lacks ("No backend type associated with device type cpu" under plain NCCL).
CUDA_BACKEND = "cpu:gloo,cuda:nccl"
CPU_BACKEND = "gloo"


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


def setup_distributed(requested_device: str) -> DistContext:
    """Join the process group torchrun describes in the environment; single process otherwise."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext()
    ctx = DistContext(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    use_cuda = requested_device != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(ctx.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(CUDA_BACKEND if use_cuda else CPU_BACKEND)
    return ctx


def teardown_distributed(ctx: DistContext) -> None:
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()
