"""`train.compile`: the training model compiled for the batch shapes training will meet.

Tight token buckets change shape every batch, so they compile with dynamic shapes and the fused loss left out of
the graph; `train.length_multiple` (a few widths) or `train.pack_length` (one shape) compile statically, one graph
per width, which CUDA graphs (`reduce-overhead`, or the `cudagraphs` backend) can then replay.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

from nmt.config import CUDA_GRAPH_MODES, TrainConfig
from nmt.errors import NMTError
from nmt.models.base import compile_loss_outside_graph
from nmt.models.rnn_encoder import trace_recurrences


@dataclass(frozen=True)
class CompiledTraining:
    model: nn.Module  # what the training step calls
    cuda_graphs: bool  # it replays CUDA graphs: each update must mark where a new one begins


def compile_for_training(model: nn.Module, train_model: nn.Module, cfg: TrainConfig, device: torch.device,
                         batch_widths: int | None, log: Callable[[str], None] | None = None) -> CompiledTraining:
    """`train_model` (the model, or its DDP wrapper) compiled as `cfg` asks. `batch_widths`: how many widths
    `train.length_multiple` makes (None without it); `model` is the bare model, whose loss and encoders are set up
    for the graph. `log` hears about a fallback (main rank only)."""
    static = bool(cfg.length_multiple or cfg.pack_length)
    if not static:  # the loss's block loop depends on the token count: a recompile per batch inside the graph
        compile_loss_outside_graph(model)
        dynamic_shapes_traced_once()
    if batch_widths is not None:  # every width compiles once, more than dynamo's default 8 may be
        dynamo = torch._dynamo.config
        limit = "recompile_limit" if hasattr(dynamo, "recompile_limit") else "cache_size_limit"  # torch < 2.6
        setattr(dynamo, limit, max(getattr(dynamo, limit), batch_widths + 1))
        # An RNN in one graph: the encoder's recurrence written out with pads masked, an input-feeding decoder's
        # steps written out, other decoders' nn.GRU/nn.LSTM steps traced through (dynamo's allow_rnn), every loop
        # unrolled per width.
        trace_recurrences(model)
        dynamo.allow_rnn = True
    mode, backend = cfg.compile_mode, cfg.compile_backend
    if backend == "cudagraphs":
        mode = "default"
        if device.type != "cuda":  # the same trace, run eagerly: cudagraphs would warn and do this
            backend = "aot_eager"
            if log:
                log("train.compile_backend cudagraphs: no CUDA graphs on the CPU, the traced graph runs eagerly "
                    "(aot_eager)")
    if cfg.compile_scope == "layers":  # refused by the config with CUDA graph modes and for RNNs
        compile_regions(model.compile_regions(static), dynamic=not static, mode=mode)
        return CompiledTraining(train_model, cuda_graphs=False)
    compiled = torch.compile(train_model, dynamic=not static, backend=backend,
                             mode=None if mode == "default" else mode)
    cuda_graphs = device.type == "cuda" and (mode in CUDA_GRAPH_MODES or backend == "cudagraphs")
    return CompiledTraining(compiled, cuda_graphs)


def dynamic_shapes_traced_once() -> None:
    """Dynamic shapes that trace each graph once, for the rest of the process:
    - without dynamo's duck sizing, which makes sizes that are equal in the first batch one symbol: a first batch of
      16 sentences 16 tokens long (or as long in source as in target) compiles a graph guarded on batch == length,
      and the next batch compiles everything again (the 2026-11-27 H200 lease: tests/test_cuda.py's 3 graphs where
      2 were due; ~20 s a recompile on the H100s);
    - with Python floats as constants (the layer norms' eps, label smoothing): left symbolic, as torch >= 2.6 does
      under dynamic shapes, the first trace fails where layer_norm needs a real eps and dynamo traces the whole
      model through AOT autograd again (the tiny test Transformer's first compiled update: 30 s, 15 s with them
      constant). They never change within a run, so nothing is compiled again for them.
    torch 2.4 (pyproject's floor) has no duck-sizing knob and keeps duck sizing: setting the knob there stopped
    `train.compile` with an internal error before the first update."""
    from torch.fx.experimental import _config as symbolic_shapes  # dynamo's own knob; its guard message names it

    if hasattr(symbolic_shapes, "use_duck_shape"):
        symbolic_shapes.use_duck_shape = False
    torch._dynamo.config.specialize_float = True


def compile_regions(regions: list[nn.Module], dynamic: bool, mode: str = "default") -> None:
    """Each module of `regions` compiled on its own (regional compilation): one compiled forward per class, which
    every instance shares (their parameters are the graph's inputs, not constants), so that six identical layers
    compile once. A module runs its compiled forward in training mode only: in eval mode (validation's dev loss and
    decoding, whose incremental steps are shapes of their own) it runs eagerly, as a whole-model compile leaves
    the bare model to them. The parameters and state_dict keys stay as they were."""
    compiled: dict[type, Callable] = {}
    for module in regions:
        kind = type(module)
        if kind not in compiled:
            compiled[kind] = torch.compile(kind.forward, dynamic=dynamic, mode=None if mode == "default" else mode)
        module.forward = _training_only(module, compiled[kind], module.forward)


def _training_only(module: nn.Module, compiled: Callable, eager: Callable) -> Callable:
    def forward(*args, **kwargs):
        return compiled(module, *args, **kwargs) if module.training else eager(*args, **kwargs)
    return forward


@contextlib.contextmanager
def compiler_failures_explained() -> Iterator[None]:
    """torch.compile's own failures as one line that names the way out. They surface at the first compiled update
    (or its backward), not at setup: a torch whose compiler cannot build this model's kernels (torch 2.4's inductor
    on a CPU: C++ that does not compile, results/tests-torch-2.4.1-cpu-amx.json) is not a bug in nmt."""
    try:
        yield
    except torch._dynamo.exc.TorchDynamoException as err:
        cause = getattr(err, "inner_exception", None) or err  # a backend's failure: what the backend raised
        first = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
        raise NMTError(f"train.compile: torch {torch.__version__}'s compiler failed on this model "
                       f"({type(cause).__name__}: {first[:160]}); train without it (train.compile: false), or with "
                       f"a torch its compiled paths are tested on (2.11, 2.13)") from err
