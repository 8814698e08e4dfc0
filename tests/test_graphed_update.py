"""train.cuda_graph (nmt/graphed_update.py) on a CPU, with torch.cuda's graph and stream calls faked.

A real capture needs a GPU (tests/test_cuda.py). Here the fake capture runs the update and then undoes it, as a
capture records without computing, and a replay runs the update again into the captured outputs: what this checks is
the order of things — eager updates first, one capture per batch shape, the batch, token counts, step number and
scheduled lr reaching every replay through the static tensors — not what CUDA does with them. What CUDA cannot
capture at all, an operator that reads the device back, is checked here too, on the operators the update dispatches.
"""

import collections
import contextlib
import dataclasses
from unittest import mock

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from nmt.config import load_config
from nmt.graphed_update import WARMUP_UPDATES, shape_key
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
    put back (a capture computes nothing)."""

    def __init__(self, graph: "FakeGraph", pool=None, capture_error_mode: str = "global"):
        self.graph, self.trainer = graph, graph.trainer
        assert pool is not None  # the graphs share one pool

    def __enter__(self):
        self.graph.captures += 1
        self.saved = [(t, t.detach().clone()) for t in self.graph.state_tensors()]
        assert all(group["capturable"] for group in self.trainer.optimizer.param_groups)

    def __exit__(self, *exc):
        with torch.no_grad():
            for tensor, value in self.saved:
                tensor.copy_(value)


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
        shape = next(shape for shape in graphed.shapes.values() if shape.graph is self)
        fresh = graphed._run(shape)
        for output, value in zip(shape.outputs, fresh):
            output.copy_(value)


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *args: FakeStream())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", FakeCapture)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: ("pool",))


def make_trainer(cfg, directory, data_dir, captured: bool, log=lambda *_: None) -> Trainer:
    """A trainer set up as on one GPU (`captured`: its updates captured, the fakes standing in for CUDA), or its
    eager reference on the same batch layout (as a GPU's first updates run; a recurrent encoder packs). On this CPU
    train.cuda_graph would otherwise train on token buckets (`eager_layout`): kept here, so both sides compare."""
    with mock.patch("nmt.train.eager_layout", lambda config: config):
        trainer = Trainer(cfg, Run(directory), data_dir, log=log)
    if captured:  # what __init__ decides on one GPU
        trainer.captures_updates, trainer.feed.sources_longest_first = True, False
        if trainer.feed.packed_rows:  # fixed-size targets, as captured updates take them
            trainer.feed.packed_rows = dataclasses.replace(trainer.feed.packed_rows, static=True)
    trainer.setup()
    if captured:
        FakeGraph.trainer = trainer
    return trainer


def train_updates(trainer: Trainer, updates: int) -> tuple[list[float], list[float], list]:
    """(losses, lrs, batch shapes) of `updates` updates from the start of epoch 0."""
    losses, lrs, shapes = [], [], []
    for plan in trainer.feed.update_plans(epoch=0, batch_in_epoch=0, updates=updates):
        host = trainer.feed.host_batches(plan.micro_batches)
        lrs.append(float(trainer.optimizer.param_groups[0]["lr"]))
        shapes.append(shape_key(host))
        losses.append(float(trainer.train_step(host).loss_sum))
        trainer.progress.step += 1
    return losses, lrs, shapes


@pytest.mark.parametrize("accum_steps", [1, 2])
def test_eager_updates_then_one_capture_then_replays_that_train_as_eager(tmp_path, toy_data_dir, fake_cuda,
                                                                           accum_steps):
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={
        "pack_length": 100, "cuda_graph": True, "accum_steps": accum_steps, "precision": "fp32",
        "warmup_steps": 3}))  # the lr changes at every update: each replay must read the new one
    losses, lrs = {}, {}
    for captured in (False, True):
        trainer = make_trainer(cfg, tmp_path / f"run-{captured}-{accum_steps}", toy_data_dir, captured)
        losses[captured], lrs[captured], _ = train_updates(trainer, 8)
        if captured:
            graphed = trainer.graphed_update
            (shape,) = graphed.shapes.values()  # packed rows: one shape
            assert graphed.eager_updates == WARMUP_UPDATES
            assert (shape.graph.captures, shape.graph.replays) == (1, 8 - WARMUP_UPDATES)
            assert not any(group["capturable"] for group in trainer.optimizer.param_groups)  # only while capturing
    assert lrs[True] == pytest.approx(lrs[False], rel=1e-6) and len(set(lrs[True])) == 8
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)


@pytest.mark.parametrize("model", [{}, {"arch": "bahdanau", "hidden_size": 32}, {"arch": "seq2seq", "hidden_size": 32},
                                   {"arch": "luong", "hidden_size": 32, "input_feeding": True}],
                         ids=["transformer", "bahdanau", "seq2seq", "luong-feed"])
def test_a_graph_per_batch_width_each_captured_after_one_eager_run(tmp_path, toy_data_dir, fake_cuda, model):
    """train.length_multiple makes a batch shape per width: each is run eagerly once, then captured and replayed;
    the graphs train as eager updates do (an RNN's encoder masked in the graphs, packed in the eager fallback)."""
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, model=model, train={
        "length_multiple": 4, "cuda_graph": True, "precision": "fp32", "max_tokens": 300}))
    updates, losses, said = 14, {}, []
    for captured in (False, True):
        trainer = make_trainer(cfg, tmp_path / f"run-{captured}", toy_data_dir, captured, log=said.append)
        losses[captured], _, shapes = train_updates(trainer, updates)
    widths = trainer.feed.static_shapes.width_count(trainer.train_data.src_lengths, trainer.train_data.tgt_lengths)
    assert any(f"then that shape's update is one replayed CUDA graph (up to {widths} shapes)" in line for line in said)
    graphed = trainer.graphed_update
    seen = collections.Counter()
    expected_eager = 0
    for i, key in enumerate(shapes):  # eager: the warm-up updates, and any shape's first update after them
        expected_eager += i < WARMUP_UPDATES or seen[key] == 0
        seen[key] += 1
    captured_shapes = [shape for shape in graphed.shapes.values() if shape.graph is not None]
    assert len(seen) > 2 and graphed.graphs == len(captured_shapes) > 1  # several widths, several graphs
    assert graphed.eager_updates == expected_eager < updates
    assert sum(shape.graph.replays for shape in captured_shapes) == updates - expected_eager
    assert all(shape.graph.captures == 1 for shape in captured_shapes)
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)


@pytest.mark.parametrize("scope", ["model", "layers"])
def test_a_compiled_model_compiles_in_the_eager_runs_and_never_while_captured(tmp_path, toy_data_dir, fake_cuda,
                                                                             monkeypatch, scope):
    """train.compile with train.cuda_graph: the graphs replay the compiled model's kernels. Every width compiles in
    its eager first run (forward and backward), so that a capture records kernels and never compiles (a compiler
    that launches and synchronizes inside a capture would fail it). aot_eager stands in for inductor (seconds)."""
    from torch._dynamo.utils import counters

    import nmt.compile_model

    compile_ = torch.compile
    monkeypatch.setattr(nmt.compile_model.torch, "compile",
                        lambda model, **kwargs: compile_(model, **{**kwargs, "backend": "aot_eager"}))
    compiled_while_capturing = []
    enter, exit_ = FakeCapture.__enter__, FakeCapture.__exit__

    def entering(self):
        self.graphs_before = counters["stats"]["unique_graphs"]
        return enter(self)

    def exiting(self, *exc):
        compiled_while_capturing.append(counters["stats"]["unique_graphs"] - self.graphs_before)
        return exit_(self, *exc)

    monkeypatch.setattr(FakeCapture, "__enter__", entering)
    monkeypatch.setattr(FakeCapture, "__exit__", exiting)
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={
        "length_multiple": 4, "cuda_graph": True, "compile": True, "compile_scope": scope, "precision": "fp32",
        "max_tokens": 300}))
    torch._dynamo.reset()
    counters.clear()
    trainer = make_trainer(cfg, tmp_path / "run", toy_data_dir, captured=True)
    # What the update calls: the compiled module, or the model whose layers run compiled forwards.
    assert (trainer.train_model is not trainer.model) == (scope == "model")
    assert ("forward" in vars(trainer.model.encoder_layers[0])) == (scope == "layers")
    train_updates(trainer, 12)
    assert trainer.graphed_update.graphs > 1 and counters["stats"]["unique_graphs"] >= trainer.graphed_update.graphs
    assert compiled_while_capturing == [0] * trainer.graphed_update.graphs


# Operators that make the host wait for the device (a value read back, or an output whose size depends on values):
# what a CUDA graph cannot capture, and what stalls an eager update's queue.
HOST_READS = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.masked_select.default",
              "aten.is_nonzero.default", "aten.equal.default", "aten.unique_dim.default",
              "aten._unique2.default", "aten.unique_consecutive.default", "aten.repeat_interleave.Tensor"}


class HostReads(TorchDispatchMode):
    """Records every operator that reads the device back (HOST_READS, and indexing by a boolean mask)."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        masks = name.startswith("aten.index") and any(
            isinstance(index, torch.Tensor) and index.dtype == torch.bool
            for arg in args if isinstance(arg, (list, tuple)) for index in arg)
        if name in HOST_READS or masks:
            self.found.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("model, shapes", [
    ({}, {"pack_length": 100}), ({}, {"length_multiple": 8}),
    ({"arch": "bahdanau", "hidden_size": 32}, {"length_multiple": 8}),
    ({"arch": "seq2seq", "hidden_size": 32}, {"length_multiple": 8}),
    ({"arch": "luong", "hidden_size": 32, "input_feeding": True}, {"length_multiple": 8})],
    ids=["packed", "widths", "bahdanau", "seq2seq", "luong-feed"])
def test_a_captured_update_never_reads_the_device(tmp_path, toy_data_dir, fake_cuda, model, shapes):
    """Every operator of the updates train.cuda_graph runs (eager, captured and replayed, with dropout, label
    smoothing, clipping and accumulation) is one a CUDA graph can hold: none reads a value back to the host."""
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, model={**model, "dropout": 0.1}, train={
        **shapes, "cuda_graph": True, "precision": "bf16", "label_smoothing": 0.1, "accum_steps": 2,
        "clip_norm": 1.0}))
    trainer = make_trainer(cfg, tmp_path / "run", toy_data_dir, captured=True)
    graphed = trainer.graphed_update
    run = graphed._run
    reads = HostReads()

    def watched(shape):
        with reads:
            return run(shape)

    graphed._run = watched
    train_updates(trainer, WARMUP_UPDATES + 3)
    assert graphed.graphs >= 1
    assert reads.found == []
    # The mode sees what it should: the packed encoder an RNN's eager fallback runs reads its lengths back.
    if model:
        fallback = make_trainer(cfg, tmp_path / "eager", toy_data_dir, captured=False)
        (batch,) = fallback.feed.host_batches(next(iter(fallback.feed.update_plans(0, 0, 1))).micro_batches[:1])
        with reads:
            fallback.model.encoder(batch.src)
        assert reads.found


@pytest.mark.parametrize("settings, static", [({}, False), ({"compile": True}, True)], ids=["eager", "compiled"])
def test_packed_rows_take_fixed_size_targets_only_where_a_graph_or_compiler_needs_them(tmp_path, toy_data_dir,
                                                                                       settings, static):
    """Packed rows trained eagerly (train.pack_length alone) send the real targets only to the loss, not every
    position of the rows; compiled, every position."""
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={"pack_length": 100, **settings}))
    trainer = make_trainer(cfg, tmp_path / "run", toy_data_dir, captured=False)
    plan = next(trainer.feed.update_plans(epoch=0, batch_in_epoch=0, updates=1))
    batch = trainer.feed.host_batches(plan.micro_batches)[0]
    assert trainer.feed.packed_rows.static is static
    assert (batch.targets.numel() == batch.tgt_in.numel()) is static  # padding in the loss only when static
