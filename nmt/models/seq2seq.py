"""Sutskever/Cho encoder–decoder without attention: the encoder's final state is the decoder's only view of the
source."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from nmt.models.base import AttentionChoice, EncoderDecoder, Readout, State, dense_params, select
from nmt.models.dropout import Dropout
from nmt.models.rnn_encoder import RNNEncoder, stacked_rnn


class Seq2Seq(EncoderDecoder):
    """GRU encoder; GRU decoder fed [embedding; final encoder state] at every step (d2l.ai's Seq2SeqDecoder)."""

    has_attention = False
    takes_source_lengths = True

    def __init__(self, src_embed: nn.Embedding, tgt_embed: nn.Embedding, hidden_size: int, num_layers: int,
                 dropout: float, tie_output: bool):
        super().__init__()
        embed_dim = tgt_embed.embedding_dim
        self.encoder = RNNEncoder(src_embed, "gru", hidden_size, num_layers, dropout, bidirectional=False)
        self.tgt_embed, self.dropout = tgt_embed, Dropout(dropout)
        self.decoder = stacked_rnn("gru", embed_dim + hidden_size, hidden_size, num_layers, dropout)
        self.readout = Readout(hidden_size + hidden_size + embed_dim, embed_dim, tgt_embed.num_embeddings, dropout,
                               tgt_embed if tie_output else None)

    def encode(self, src: torch.Tensor, src_lengths: np.ndarray | None = None) -> State:
        _, hidden, _ = self.encoder(src, src_lengths)  # (L, B, H)
        return {"hidden": hidden.transpose(0, 1), "context": hidden[-1]}

    def _decode(self, embedded: torch.Tensor, hidden: torch.Tensor, context: torch.Tensor):
        # embedded (B, T, E), hidden (L, B, H), context (B, H) → the readout's input (B, T, 2H + E), new hidden
        ctx = context.unsqueeze(1).expand(-1, embedded.shape[1], -1)
        outputs, hidden = self.decoder(torch.cat([embedded, ctx], dim=-1), hidden)
        return torch.cat([outputs, ctx, embedded], dim=-1), hidden

    def step(self, prev_tokens, state, attention: AttentionChoice | None = None):
        embedded = self.dropout(self.tgt_embed(prev_tokens)).unsqueeze(1)
        features, hidden = self._decode(embedded, state["hidden"].transpose(0, 1).contiguous(), state["context"])
        return self.readout(features).squeeze(1), {**state, "hidden": hidden.transpose(0, 1)}, None

    def forward(self, src, tgt_in, keep=None, targets=None, label_smoothing=0.0, src_lengths=None):
        state = self.encode(src, src_lengths)  # no attention, so the whole target runs in one cuDNN call
        features, _ = self._decode(self.dropout(self.tgt_embed(tgt_in)),
                                   state["hidden"].transpose(0, 1).contiguous(), state["context"])
        return self.readout(select(features, keep), targets, label_smoothing)

    def forward_flops(self, src_len, tgt_len):
        return 2 * dense_params(self.encoder), 2 * dense_params(self.decoder, self.readout)
