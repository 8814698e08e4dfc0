"""Recurrent building blocks shared by seq2seq, Bahdanau and Luong: stacked RNNs and the packed encoder."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.models.base import padding_mask
from nmt.models.dropout import Dropout
from nmt.models.masked_rnn import masked_rnn


def stacked_rnn(cell: str, input_size: int, hidden_size: int, num_layers: int, dropout: float,
                bidirectional: bool = False) -> nn.RNNBase:
    """A batch-first GRU or LSTM; dropout between layers only (torch warns about it with one layer)."""
    rnn_cls = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
    return rnn_cls(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0,
                   bidirectional=bidirectional)


class RNNEncoder(nn.Module):
    """src (B, S) → outputs (B, S, H·dirs), final state: h (L, B, H·dirs) [, c for LSTM], directions concatenated."""

    def __init__(self, embedding: nn.Embedding, cell: str, hidden_size: int, num_layers: int, dropout: float,
                 bidirectional: bool):
        super().__init__()
        self.embedding, self.dropout = embedding, Dropout(dropout)
        self.rnn = stacked_rnn(cell, embedding.embedding_dim, hidden_size, num_layers, dropout, bidirectional)
        self.bidirectional = bidirectional
        self.traced_when_compiled = False  # see trace_recurrences
        self.masked_in_training = False  # see capture_recurrences

    def forward(self, src: torch.Tensor, lengths: np.ndarray | None = None):
        """`lengths`: the rows' source lengths on the host, longest first (`Batch.source_lengths`), when the caller
        has them; without them they are counted on the device and read back, a host sync on a GPU."""
        mask = padding_mask(src)
        embedded = self.dropout(self.embedding(src))
        # Padding never changes a sentence's outputs or final state: packed sequences (cuDNN's and the CPU's fast
        # path), or in a compiled graph or a captured update the recurrence written out with pads masked (packing
        # can be neither traced nor captured).
        if (self.traced_when_compiled and torch.compiler.is_compiling()) or (self.masked_in_training and self.training):
            outputs, final = masked_rnn(self.rnn, embedded, ~mask)
        else:
            # Rows in any order are sorted by packing, which moves the order to the device and reads its inverse
            # back (two more syncs); rows already longest first need neither.
            longest_first = lengths is not None
            lengths = torch.from_numpy(lengths) if longest_first else (~mask).sum(1).cpu()
            packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=longest_first)
            outputs, final = self.rnn(packed)
            outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])
        if isinstance(final, tuple):
            final = tuple(self._merge_directions(x) for x in final)
        else:
            final = self._merge_directions(final)
        return outputs, final, mask

    def _merge_directions(self, state: torch.Tensor) -> torch.Tensor:
        if not self.bidirectional:
            return state
        layers2, batch, hidden = state.shape  # (L·2, B, H) → (L, B, 2H)
        return state.view(layers2 // 2, 2, batch, hidden).transpose(1, 2).reshape(layers2 // 2, batch, 2 * hidden)


def trace_recurrences(model: nn.Module) -> None:
    """For torch.compile on static shapes: the model's recurrences take their traceable form when compiled, so that
    a graph holds the whole update: RNN encoders the masked recurrence, an input-feeding decoder its steps written
    out (`rnn_step`); every module that has such a form says so by a `traced_when_compiled` attribute. Eager calls,
    such as validation's, keep packing and the cuDNN modules. Not for dynamic shapes: the time loops would fix a
    graph to each length."""
    for module in model.modules():
        if hasattr(module, "traced_when_compiled"):
            module.traced_when_compiled = True


def capture_recurrences(model: nn.Module) -> None:
    """For a training update captured as a CUDA graph (train.cuda_graph): RNN encoders run the masked recurrence in
    training mode. Packing reads the lengths on the host and lays the batch out by them, which a graph would fix to
    the captured batch's. Calls in eval mode (validation, translation) keep packing; the decoders keep cuDNN's
    modules, which CUDA graphs capture (their dropout state included, since pytorch#57373)."""
    for module in model.modules():
        if isinstance(module, RNNEncoder):
            module.masked_in_training = True
