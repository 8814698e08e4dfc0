"""train.cuda_graph's sequencing (nmt/graphed_update.py) on a CPU, with torch.cuda's graph and stream calls faked.

A real capture needs a GPU (tests/test_cuda.py). Here the fake capture runs the update and then undoes it, as a
capture records without computing, and a replay runs the update again into the captured outputs: what this checks is
the order of things — eager updates first, one capture, the batch, token counts, step number and scheduled lr
reaching every replay through the static tensors — not what CUDA does with them.
"""

import contextlib

import pytest
import torch

from nmt.config import load_config
from nmt.graphed_update import WARMUP_UPDATES, GraphedUpdate
from nmt.run_dir import Run
from nmt.train import Trainer
from tests_helpers import TOY_RUN, write_config


class FakeStream:
    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, other) -> None:
        pass


class FakeCapture:
    """torch.cuda.graph faked: the update runs, then the weights, the optimizer state and the non-finite record are
    put back (a capture computes nothing) and the gradients dropped (a replay writes them anew)."""

    def __init__(self, graph: "FakeGraph", capture_error_mode: str = "global"):
        self.graph, self.trainer = graph, graph.trainer

    def __enter__(self):
        self.graph.captures += 1
        self.saved = [(t, t.detach().clone()) for t in self.graph.state_tensors()]

    def __exit__(self, *exc):
        with torch.no_grad():
            for tensor, value in self.saved:
                tensor.copy_(value)
        self.trainer.optimizer.zero_grad(set_to_none=True)


class FakeGraph:
    trainer: Trainer  # set by the test

    def __init__(self):
        self.captures, self.replays = 0, 0

    def state_tensors(self) -> list[torch.Tensor]:
        state = [s for per_parameter in self.trainer.optimizer.state.values() for s in per_parameter.values()
                 if isinstance(s, torch.Tensor)]
        return [*self.trainer.model.parameters(), *state, self.trainer.first_nonfinite]

    def replay(self) -> None:
        self.replays += 1
        graphed = self.trainer.graphed_update
        fresh = graphed.update(graphed.static, graphed.token_counts, graphed.step_number)
        for output, value in zip(graphed.outputs, fresh):
            output.copy_(value)
        self.trainer.optimizer.zero_grad(set_to_none=True)


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *args: FakeStream())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", FakeCapture)


@pytest.mark.parametrize("accum_steps", [1, 2])
def test_eager_updates_then_one_capture_then_replays_that_train_as_eager(tmp_path, toy_data_dir, fake_cuda,
                                                                           accum_steps):
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={
        "pack_length": 100, "cuda_graph": True, "accum_steps": accum_steps, "precision": "fp32",
        "warmup_steps": 3}))  # the lr changes at every update: each replay must read the new one
    losses, lrs = {}, {}
    for graphed in (False, True):
        trainer = Trainer(cfg, Run(tmp_path / f"run-{graphed}-{accum_steps}"), toy_data_dir, log=lambda *_: None)
        trainer.setup()  # on a CPU: eager updates (the fallback)
        if graphed:
            FakeGraph.trainer = trainer
            trainer.graphed_update = GraphedUpdate(trainer.device_update, trainer.optimizer, trainer.device)
        losses[graphed], lrs[graphed] = [], []
        for plan in trainer.update_plans(epoch=0, batch_in_epoch=0, updates=8):
            lrs[graphed].append(float(trainer.optimizer.param_groups[0]["lr"]))
            losses[graphed].append(float(trainer.train_step(trainer.host_batches(plan.micro_batches)).loss_sum))
            trainer.progress.step += 1
        if graphed:
            graph = trainer.graphed_update.graph
            assert trainer.graphed_update.eager_updates == WARMUP_UPDATES
            assert (graph.captures, graph.replays) == (1, 8 - WARMUP_UPDATES)
            assert all(group["capturable"] for group in trainer.optimizer.param_groups)
    assert lrs[True] == pytest.approx(lrs[False], rel=1e-6) and len(set(lrs[True])) == 8
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)
