"""`train.cuda_graph`: a whole training update (forward, backward, clipping, AdamW) captured once as one CUDA graph
and replayed.

Why: on the H100 lease of 2026-11-26 the host, not the GPU, set the pace. An eager update launches ~1,750 operators
at ~32 µs each on that machine's host (results/gpu-host-overhead-transformer-h100.json), and even packed rows under
inductor's CUDA graphs spent ~5 ms an update on the host in the optimizer phase alone
(results/gpu-bench-transformer-packed128-graphs-h100.json). Replayed as one graph, an update costs the host a few
copies and one launch.

How, after PyTorch's "whole-network capture" recipe (torch.cuda.graphs): static input tensors that each update's
batch is copied into; a few eager updates first, on a side stream (kernels chosen, AdamW's state made); AdamW
`capturable`, its lr a device tensor that the scheduler fills in place (a float would be baked into the graph); the
step number and each micro-batch's token count as device tensors too; autocast without its weight cache; gradients
left as the capture allocated them (the replay rewrites them), so never zeroed to None after capture.
"""

from __future__ import annotations

from typing import Callable

import torch

from nmt.data.batching import Batch
from nmt.errors import NMTError

# Eager updates before the capture (PyTorch's recipe uses a few): the first allocates AdamW's state and picks kernels.
WARMUP_UPDATES = 3

# (micro-batches on the device, each one's target-token count, the step number this update makes) → (loss sum,
# update skipped): the device side of one update, capturable (no host sync, nothing read back).
DeviceUpdate = Callable[[list[Batch], list[torch.Tensor], torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class GraphedUpdate:
    """Runs `update` eagerly for WARMUP_UPDATES updates, then captures it and replays the graph for every later one.
    The outputs are the graph's own tensors: the next replay overwrites them, so read them before it (the training
    loop adds the loss into its window at once)."""

    def __init__(self, update: DeviceUpdate, optimizer: torch.optim.Optimizer, device: torch.device):
        self.update, self.optimizer, self.device = update, optimizer, device
        self.lrs = [torch.tensor(float(group["lr"]), device=device) for group in optimizer.param_groups]
        for group, lr in zip(optimizer.param_groups, self.lrs):  # the lr read on the device at every replay
            group["lr"] = lr
        self.static: list[Batch] | None = None  # the graph's inputs
        self.token_counts: list[torch.Tensor] = []
        self.step_number = torch.zeros((), dtype=torch.long, device=device)
        self.eager_updates = 0
        self.side_stream = torch.cuda.Stream(device)  # where the eager updates before the capture run
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: tuple[torch.Tensor, torch.Tensor] | None = None

    def __call__(self, host_batches: list[Batch], step_number: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One update on these (pinned) micro-batches, making step `step_number`: (loss sum, skipped)."""
        self._copy_in(host_batches, step_number)
        if self.graph is None and self.eager_updates < WARMUP_UPDATES:
            return self._eager()
        if self.graph is None:
            self._capture()
        self.graph.replay()
        return self.outputs

    def _copy_in(self, host_batches: list[Batch], step_number: int) -> None:
        if self.static is None:
            self.static = [batch.to(self.device) for batch in host_batches]
            self.token_counts = [torch.zeros((), device=self.device) for _ in host_batches]
        if len(host_batches) != len(self.static):
            raise ValueError(f"{len(host_batches)} micro-batches for a graph of {len(self.static)}")
        for batch, static, count in zip(host_batches, self.static, self.token_counts):
            batch.copy_into(static)
            count.fill_(batch.tgt_tokens)
        self.step_number.fill_(step_number)
        for group, lr in zip(self.optimizer.param_groups, self.lrs):
            if group["lr"] is not lr:  # a scheduler that assigns a float (torch before 2.6): the graph reads `lr`
                lr.fill_(float(group["lr"]))
                group["lr"] = lr

    def _eager(self) -> tuple[torch.Tensor, torch.Tensor]:
        side = self.side_stream
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            outputs = self.update(self.static, self.token_counts, self.step_number)
            self.optimizer.zero_grad(set_to_none=True)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.eager_updates += 1
        return outputs

    def _capture(self) -> None:
        # Gradients None before the capture: its backward allocates them in the graph's memory, and every replay
        # writes them there again (the optimizer's kernels read them at those addresses).
        self.optimizer.zero_grad(set_to_none=True)
        for group in self.optimizer.param_groups:  # set only now: AdamW warns when a capturable step runs eagerly
            group["capturable"] = True
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: the prefetch thread pins the next batches meanwhile, which "global" capture would refuse.
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self.outputs = self.update(self.static, self.token_counts, self.step_number)
        except RuntimeError as err:  # an operation CUDA cannot capture (a host sync, a new allocation mode...)
            first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
            raise NMTError(f"train.cuda_graph: torch {torch.__version__} could not capture this model's update "
                           f"({first[:160]}); train without it (train.cuda_graph: false)") from err
        self.graph = graph
