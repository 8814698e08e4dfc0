"""The interface every architecture implements, for training (teacher forcing) and for search.

    state = model.encode(src)                         # src (B, S) int64 → per-sentence decoder state
    logits, state = model.step(prev_tokens, state)    # prev_tokens (B,) → logits (B, V)
    logits = model(src, tgt_in)                       # teacher forcing: (B, S), (B, T) → (B, T, V)

A state is a dict of tensors whose first axis is the batch, so beam search can reorder any model's state with
one `index_select` (see `reorder_state`). With `need_attention=True`, `step` also stores the source attention
of the new token under state["attention"] (B, S).
"""

from __future__ import annotations

import torch
from torch import nn

from nmt.data.tokenizer import BOS_ID, PAD_ID

State = dict[str, torch.Tensor]


def reorder_state(state: State, index: torch.Tensor) -> State:
    return {name: tensor.index_select(0, index) for name, tensor in state.items()}


def padding_mask(tokens: torch.Tensor) -> torch.Tensor:
    return tokens.eq(PAD_ID)


class EncoderDecoder(nn.Module):
    has_attention = True  # False for models without source attention (seq2seq): nothing to plot

    def encode(self, src: torch.Tensor) -> State:
        raise NotImplementedError

    def step(self, prev_tokens: torch.Tensor, state: State, need_attention: bool = False) -> tuple[torch.Tensor, State]:
        raise NotImplementedError

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing by stepping; architectures that can run all steps at once override this."""
        state = self.encode(src)
        outputs = []
        for t in range(tgt_in.shape[1]):
            logits, state = self.step(tgt_in[:, t], state)
            outputs.append(logits)
        return torch.stack(outputs, dim=1)


class Readout(nn.Module):
    """Decoder features → tanh → dropout → vocabulary logits; the output matrix may be the target embedding's."""

    def __init__(self, in_dim: int, embed_dim: int, vocab_size: int, dropout: float, tied: nn.Embedding | None):
        super().__init__()
        self.pre = nn.Linear(in_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(embed_dim, vocab_size, bias=False)
        if tied is not None:
            self.out.weight = tied.weight

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(torch.tanh(self.pre(features))))


def bos_tokens(batch: int, device: torch.device) -> torch.Tensor:
    return torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
