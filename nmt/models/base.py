"""The interface every architecture implements, for training (teacher forcing) and for search.

    state = model.encode(src)                                  # src (B, S) int64 → per-sentence decoder state
    logits, state, weights = model.step(prev_tokens, state)    # prev_tokens (B,) → logits (B, V)
    logits = model(src, tgt_in)                                # teacher forcing: (B, S), (B, T) → (B, T, V)
    loss = model(src, tgt_in, keep, targets, label_smoothing)  # training: the summed loss at the `keep` positions

A state is a dict of tensors whose first axis is the batch, so beam search can reorder any model's state with
one `index_select` (see `reorder_state`). `step(..., attention=AttentionChoice(...))` also returns the source
attention of the new token, weights (B, S); without it, weights is None.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nmt.data.tokenizer import PAD_ID
from nmt.errors import NMTError, counted
from nmt.models.dropout import Dropout
from nmt.models.loss import head_cross_entropy

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class AttentionChoice:
    """Which source attention `step` returns: a layer (negative counts from the last) and a head (None: the mean).

    Recurrent models have one attention with one head: only the defaults apply to them.
    """

    layer: int = -1
    head: int | None = None


def reorder_state(state: State, index: torch.Tensor) -> State:
    return {name: tensor.index_select(0, index) for name, tensor in state.items()}


def padding_mask(tokens: torch.Tensor) -> torch.Tensor:
    return tokens.eq(PAD_ID)


class EncoderDecoder(nn.Module):
    has_attention = True  # False for models without source attention (seq2seq): nothing to plot
    # True: `forward` and `encode` also take `src_lengths`, the rows' source lengths on the host, longest first
    # (`Batch.source_lengths`), with which a recurrent encoder packs its input without a host sync.
    takes_source_lengths = False
    # True: `step` and `forward` return log-probabilities, normalized already (an ensemble's mixture), not logits.
    gives_log_probs = False
    # The decoder positions a search may use (start token included), or None: a recurrent decoder reads any length.
    max_target_positions: int | None = None

    @property
    def attention_layers_heads(self) -> tuple[int, int]:
        """(layers, heads) an AttentionChoice may pick from."""
        return (1, 1) if self.has_attention else (0, 0)

    def check_attention_choice(self, choice: AttentionChoice) -> None:
        layers, heads = self.attention_layers_heads
        if not layers:
            raise NMTError(f"a {type(self).__name__} model has no source attention")
        if not -layers <= choice.layer < layers or (choice.head is not None and not 0 <= choice.head < heads):
            raise NMTError(f"this model has {counted(layers, 'attention layer')} with {counted(heads, 'head')} each; "
                           f"got layer {choice.layer}, head {choice.head}")

    def encode(self, src: torch.Tensor) -> State:
        raise NotImplementedError

    def step(self, prev_tokens: torch.Tensor, state: State, attention: AttentionChoice | None = None
             ) -> tuple[torch.Tensor, State, torch.Tensor | None]:
        raise NotImplementedError

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, keep: torch.Tensor | None = None,
                targets: torch.Tensor | None = None, label_smoothing: float = 0.0) -> torch.Tensor:
        """Teacher forcing: logits (B, T, V), or only at the target positions `keep` (B, T) marks, as (N, V); with
        `targets` (N,), the summed cross-entropy there instead (see OutputHead). Every architecture runs as much as
        it can for all steps at once (a recurrence steps; the vocabulary projection never does) and must agree with
        `step` (tests/models/test_models.py)."""
        raise NotImplementedError

    def forward_flops(self, src_len: float, tgt_len: float) -> tuple[float, float]:
        """Forward FLOPs per source token and per target token at these mean lengths (for MFU)."""
        raise NotImplementedError


def select(per_position: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """(B, T, …) → the rows `keep` marks, as (N, …); everything when `keep` is None. `keep` is a (B, T) boolean mask
    or the ascending flat indices of its True positions (B·T index space): the same rows, and on a GPU the indices
    avoid the host sync that a boolean mask's data-dependent shape costs."""
    if keep is None:
        return per_position
    if keep.dtype == torch.bool:
        return per_position[keep]
    return per_position.flatten(0, 1).index_select(0, keep)


def dense_params(*modules: nn.Module) -> int:
    """Weights that multiply every token once (matrices), embeddings excluded: 2 FLOPs each per token forward."""
    return sum(p.numel() for m in modules for name, p in m.named_parameters()
               if p.dim() >= 2 and not isinstance(_owner(m, name), nn.Embedding))


def _owner(module: nn.Module, parameter_name: str) -> nn.Module:
    return module.get_submodule(parameter_name.rpartition(".")[0]) if "." in parameter_name else module


class OutputHead(nn.Module):
    """Features (…, E) → vocabulary logits (…, V); with `tied`, the matrix is that embedding's (Press & Wolf 2017)."""

    def __init__(self, embed_dim: int, vocab_size: int, tied: nn.Embedding | None):
        super().__init__()
        self.proj = nn.Linear(embed_dim, vocab_size, bias=False)
        if tied is not None:
            self.proj.weight = tied.weight
        self.loss = head_cross_entropy  # `compile_loss_outside_graph` may swap in a copy torch.compile leaves out
        self.block_rows: int | None = None  # the fused loss's rows at a time (train.loss_block_rows); None: its own

    @property
    def weight(self) -> torch.Tensor:
        return self.proj.weight

    def forward(self, features: torch.Tensor, targets: torch.Tensor | None = None,
                label_smoothing: float = 0.0) -> torch.Tensor:
        """Logits (…, V); with `targets` (N,) for features (N, E), the summed cross-entropy, fused with the
        projection so that the (N, V) logits are never held whole (nmt.models.loss); PAD targets count nothing."""
        if targets is None:
            return self.proj(features)
        return self.loss(features, self.proj.weight, targets, label_smoothing, rows=self.block_rows,
                         ignore_index=PAD_ID)


def set_loss_block_rows(model: nn.Module, rows: int) -> None:
    """train.loss_block_rows: the target rows each of the model's output heads projects and scores at a time in
    training's fused loss (0: the loss's own default)."""
    for module in model.modules():
        if isinstance(module, OutputHead):
            module.block_rows = rows or None


def compile_loss_outside_graph(model: nn.Module) -> None:
    """For torch.compile with dynamic shapes: the model's fused loss runs eagerly, between compiled graphs (a graph
    break). Its loop over blocks of rows would otherwise fix the graph to the number of target tokens, which changes
    almost every batch (a recompile each time). Static shapes keep the loss in the graph."""
    eager = torch.compiler.disable(head_cross_entropy)  # imports torch._dynamo (~2 s): only when compiling
    for module in model.modules():
        if isinstance(module, OutputHead):
            module.loss = eager


class Readout(nn.Module):
    """Decoder features → tanh → dropout → OutputHead (the RNN decoders' deep output layer)."""

    def __init__(self, in_dim: int, embed_dim: int, vocab_size: int, dropout: float, tied: nn.Embedding | None):
        super().__init__()
        self.pre = nn.Linear(in_dim, embed_dim)
        self.dropout = Dropout(dropout)
        self.head = OutputHead(embed_dim, vocab_size, tied)

    def forward(self, features: torch.Tensor, targets: torch.Tensor | None = None,
                label_smoothing: float = 0.0) -> torch.Tensor:
        return self.head(self.dropout(torch.tanh(self.pre(features))), targets, label_smoothing)
