"""`train.cuda_graph`: a whole training update (forward, backward, clipping, AdamW) captured as a CUDA graph, one per
batch shape, and replayed.

Why: on the H100 lease of 2026-11-26 the host, not the GPU, set the pace. An eager update launches ~1,750 operators
at ~32 µs each on that machine's host (results/gpu-host-overhead-transformer-h100.json), and even packed rows under
inductor's CUDA graphs spent ~5 ms an update on the host in the optimizer phase alone
(results/gpu-bench-transformer-packed128-graphs-h100.json). Replayed as one graph, an update costs the host a few
copies and one launch.

How, after PyTorch's "whole-network capture" recipe (torch.cuda.graphs): static input tensors that each update's
batch is copied into; a few eager updates first, on a side stream (kernels chosen, AdamW's state made), and one more
for every batch shape met later, before its capture; AdamW `capturable` while capturing, its lr a device tensor that
the scheduler fills in place (a float would be baked into the graph); the step number and each micro-batch's token
count as device tensors too; autocast without its weight cache; gradients in buffers of their own that every update
zeroes and adds into (`Trainer.keep_gradients_in_place`), so that all graphs and eager updates share them.

Batch shapes: packed rows (`train.pack_length`) make one; `train.length_multiple` one per width (a Transformer's, or
an RNN's, whose encoder then runs the masked recurrence: `nmt.models.rnn_encoder.capture_recurrences`). The graphs
share one memory pool: they never run at once, and what one leaves behind (its loss and skip flag, two scalars) is
read before the next runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from nmt.data.batching import Batch
from nmt.errors import NMTError

# Eager updates before the first capture (PyTorch's recipe uses a few): the first allocates AdamW's state and picks
# kernels. A shape first met later runs eagerly once before it is captured (its kernels and workspaces chosen).
WARMUP_UPDATES = 3

# (micro-batches on the device, each one's target-token count, the step number this update makes) → (loss sum,
# update skipped): the device side of one update, capturable (no host sync, nothing read back), gradients added into
# the parameters' own buffers.
DeviceUpdate = Callable[[list[Batch], list[torch.Tensor], torch.Tensor], tuple[torch.Tensor, torch.Tensor]]

ShapeKey = tuple[tuple[int, ...], ...]


def shape_key(batches: list[Batch]) -> ShapeKey:
    """What makes two updates one graph: the shapes of every tensor of every micro-batch."""
    return tuple(tuple(tensor.shape) for batch in batches for tensor in batch.tensors())


@dataclass
class ShapeGraph:
    """One batch shape's static inputs and, once captured, its graph and the graph's outputs."""

    inputs: list[Batch]
    token_counts: list[torch.Tensor]
    eager_updates: int = 0
    graph: torch.cuda.CUDAGraph | None = None
    outputs: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)


class GraphedUpdate:
    """Runs `update` eagerly for the first WARMUP_UPDATES updates and the first update of every shape, then captures
    that shape's update and replays its graph. The outputs are the graph's own tensors: the next replay overwrites
    them, so read them before it (the training loop adds the loss into its window at once)."""

    def __init__(self, update: DeviceUpdate, optimizer: torch.optim.Optimizer, device: torch.device):
        self.update, self.optimizer, self.device = update, optimizer, device
        self.lrs = [torch.tensor(float(group["lr"]), device=device) for group in optimizer.param_groups]
        for group, lr in zip(optimizer.param_groups, self.lrs):  # the lr read on the device at every replay
            group["lr"] = lr
        self.shapes: dict[ShapeKey, ShapeGraph] = {}
        self.step_number = torch.zeros((), dtype=torch.long, device=device)
        self.eager_updates = 0
        self.side_stream = torch.cuda.Stream(device)  # where eager updates run
        self.pool = None  # the graphs' shared memory pool, made at the first capture

    @property
    def graphs(self) -> int:
        """How many shapes have been captured."""
        return sum(shape.graph is not None for shape in self.shapes.values())

    def __call__(self, host_batches: list[Batch], step_number: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One update on these (pinned) micro-batches, making step `step_number`: (loss sum, skipped)."""
        shape = self._copy_in(host_batches, step_number)
        if shape.graph is None and (self.eager_updates < WARMUP_UPDATES or shape.eager_updates == 0):
            return self._eager(shape)
        if shape.graph is None:
            self._capture(shape)
        shape.graph.replay()
        return shape.outputs

    def _copy_in(self, host_batches: list[Batch], step_number: int) -> ShapeGraph:
        key = shape_key(host_batches)
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shapes[key] = ShapeGraph([batch.to(self.device) for batch in host_batches],
                                                  [torch.zeros((), device=self.device) for _ in host_batches])
        for batch, static, count in zip(host_batches, shape.inputs, shape.token_counts):
            batch.copy_into(static)
            count.fill_(batch.tgt_tokens)
        self.step_number.fill_(step_number)
        for group, lr in zip(self.optimizer.param_groups, self.lrs):
            if group["lr"] is not lr:  # a scheduler that assigns a float (torch before 2.6): the graph reads `lr`
                lr.fill_(float(group["lr"]))
                group["lr"] = lr
        return shape

    def _run(self, shape: ShapeGraph) -> tuple[torch.Tensor, torch.Tensor]:
        self.optimizer.zero_grad(set_to_none=False)  # in place: the gradients' addresses are the graphs' too
        return self.update(shape.inputs, shape.token_counts, self.step_number)

    def _eager(self, shape: ShapeGraph) -> tuple[torch.Tensor, torch.Tensor]:
        side = self.side_stream
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            outputs = self._run(shape)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.eager_updates += 1
        shape.eager_updates += 1
        return outputs

    def _capture(self, shape: ShapeGraph) -> None:
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        for group in self.optimizer.param_groups:  # only while capturing: AdamW warns when a capturable step runs
            group["capturable"] = True              # eagerly (the fused kernels are the same either way)
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: the prefetch thread pins the next batches meanwhile, which "global" capture would refuse.
            with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                shape.outputs = self._run(shape)
        except RuntimeError as err:  # an operation CUDA cannot capture (a host sync, a new allocation mode...)
            first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
            raise NMTError(f"train.cuda_graph: torch {torch.__version__} could not capture this model's update "
                           f"({first[:160]}); train without it (train.cuda_graph: false)") from err
        finally:
            for group in self.optimizer.param_groups:
                group["capturable"] = False
        shape.graph = graph
