"""torchrun integration: process group from the environment, NCCL on GPU and gloo on CPU."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist



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
        tensor = torch.tensor([int(flag)])
        dist.broadcast(tensor, src=0)
        return bool(tensor.item())

    def any_flag(self, flag: bool) -> bool:
        if not self.enabled:
            return flag
        tensor = torch.tensor([int(flag)])
        dist.all_reduce(tensor)
        return bool(tensor.item())


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
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return ctx


def teardown_distributed(ctx: DistContext) -> None:
    if ctx.enabled and dist.is_initialized():
        dist.destroy_process_group()
