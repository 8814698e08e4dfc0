"""Bahdanau et al. (2015): bidirectional GRU encoder, additive attention queried by the previous decoder state."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from nmt.models.attention import AdditiveAttention
from nmt.models.base import AttentionChoice, EncoderDecoder, Readout, State, dense_params, select
from nmt.models.dropout import Dropout
from nmt.models.rnn_encoder import RNNEncoder, stacked_rnn


class Bahdanau(EncoderDecoder):
    takes_source_lengths = True

    def __init__(self, src_embed: nn.Embedding, tgt_embed: nn.Embedding, hidden_size: int, num_layers: int,
                 dropout: float, tie_output: bool):
        super().__init__()
        embed_dim, memory_dim = tgt_embed.embedding_dim, 2 * hidden_size
        self.encoder = RNNEncoder(src_embed, "gru", hidden_size, num_layers, dropout, bidirectional=True)
        self.bridge = nn.Linear(memory_dim, hidden_size)  # [h_fwd; h_bwd] → initial decoder state, per layer
        self.attention = AdditiveAttention(hidden_size, memory_dim, hidden_size)
        self.tgt_embed, self.dropout = tgt_embed, Dropout(dropout)
        self.decoder = stacked_rnn("gru", embed_dim + memory_dim, hidden_size, num_layers, dropout)
        self.readout = Readout(hidden_size + memory_dim + embed_dim, embed_dim, tgt_embed.num_embeddings, dropout,
                               tgt_embed if tie_output else None)

    def encode(self, src: torch.Tensor, src_lengths: np.ndarray | None = None) -> State:
        memory, final, mask = self.encoder(src, src_lengths)
        return {"memory": memory, "keys": self.attention.prepare_keys(memory), "src_mask": mask,
                "hidden": torch.tanh(self.bridge(final)).transpose(0, 1)}

    def _recur(self, embedded: torch.Tensor, hidden: torch.Tensor, state: State):
        """One decoder step before the readout: attention queried by the previous top state, then the GRU.
        embedded (B, 1, E), hidden (L, B, H) → output (B, 1, H), context (B, 1, 2H), weights (B, 1, S), hidden."""
        context, weights = self.attention(hidden[-1].unsqueeze(1), state["keys"], state["memory"], state["src_mask"])
        output, hidden = self.decoder(torch.cat([embedded, context], dim=-1), hidden)
        return output, context, weights, hidden

    def step(self, prev_tokens, state, attention: AttentionChoice | None = None):
        embedded = self.dropout(self.tgt_embed(prev_tokens)).unsqueeze(1)  # (B, 1, E)
        output, context, weights, hidden = self._recur(embedded, state["hidden"].transpose(0, 1).contiguous(), state)
        logits = self.readout(torch.cat([output, context, embedded], dim=-1)).squeeze(1)
        new_state = {**state, "hidden": hidden.transpose(0, 1)}
        return logits, new_state, weights.squeeze(1) if attention is not None else None

    def forward(self, src, tgt_in, keep=None, targets=None, label_smoothing=0.0, src_lengths=None):
        # Only the recurrence is sequential (step t's query is state t-1): the embeddings go in, and the readout and
        # the vocabulary projection (most of the FLOPs) come out, once for all steps, on the kept positions only.
        state = self.encode(src, src_lengths)
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E)
        hidden = state["hidden"].transpose(0, 1).contiguous()
        outputs, contexts = [], []
        for t in range(tgt_in.shape[1]):
            output, context, _, hidden = self._recur(embedded[:, t:t + 1], hidden, state)
            outputs.append(output)
            contexts.append(context)
        features = torch.cat([torch.cat(outputs, dim=1), torch.cat(contexts, dim=1), embedded], dim=-1)
        return self.readout(select(features, keep), targets, label_smoothing)

    def forward_flops(self, src_len, tgt_len):
        attention = self.attention
        per_src = 2 * (dense_params(self.encoder) + dense_params(attention.key_map))
        # Additive scores: v·tanh(...) over S positions of A units, then the context over 2H memory units.
        per_tgt = 2 * (dense_params(self.decoder, self.readout, attention.query_map)
                       + src_len * (attention.v.in_features + self.bridge.in_features))
        return per_src, per_tgt
