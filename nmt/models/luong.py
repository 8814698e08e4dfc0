"""Luong et al. (2015): stacked LSTMs, global (dot/general/concat) or local-p attention after the decoder RNN."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from nmt.models.attention import AdditiveAttention, DotAttention, LocalPAttention
from nmt.models.base import AttentionChoice, EncoderDecoder, OutputHead, State, dense_params, select
from nmt.models.dropout import Dropout
from nmt.models.masked_rnn import rnn_step
from nmt.models.rnn_encoder import RNNEncoder, stacked_rnn


def luong_attention(score: str, hidden_size: int, window: int) -> nn.Module:
    if score == "local-p":
        return LocalPAttention(hidden_size, hidden_size, window)
    if score == "concat":
        return AdditiveAttention(hidden_size, hidden_size, hidden_size)
    return DotAttention(hidden_size, hidden_size, general=score == "general")


class Luong(EncoderDecoder):
    """Attentional state h~_t = tanh(W_c [c_t; h_t]); logits = W_s h~_t; optional input feeding of h~_{t-1}."""

    takes_source_lengths = True

    def __init__(self, src_embed: nn.Embedding, tgt_embed: nn.Embedding, hidden_size: int, num_layers: int,
                 dropout: float, tie_output: bool, score: str, window: int, input_feeding: bool):
        super().__init__()
        embed_dim = tgt_embed.embedding_dim
        self.encoder = RNNEncoder(src_embed, "lstm", hidden_size, num_layers, dropout, bidirectional=False)
        self.attention = luong_attention(score, hidden_size, window)
        self.tgt_embed, self.dropout, self.input_feeding = tgt_embed, Dropout(dropout), input_feeding
        self.decoder = stacked_rnn("lstm", embed_dim * (2 if input_feeding else 1), hidden_size, num_layers, dropout)
        self.combine = nn.Linear(2 * hidden_size, embed_dim, bias=False)  # W_c; its output size allows tying W_s
        self.head = OutputHead(embed_dim, tgt_embed.num_embeddings, tgt_embed if tie_output else None)
        self.traced_when_compiled = False  # input feeding's steps written out under compile: see trace_recurrences

    def encode(self, src: torch.Tensor, src_lengths: np.ndarray | None = None) -> State:
        memory, (h, c), mask = self.encoder(src, src_lengths)
        state = {"memory": memory, "keys": self.attention.prepare_keys(memory), "src_mask": mask,
                 "h": h.transpose(0, 1), "c": c.transpose(0, 1)}
        if self.input_feeding:
            state["feed"] = memory.new_zeros(memory.shape[0], self.combine.out_features)
        return state

    def _attend(self, outputs: torch.Tensor, state: State):
        # outputs (B, T, H) → attentional states (B, T, E) (the head's input, after dropout), weights (B, T, S)
        context, weights = self.attention(outputs, state["keys"], state["memory"], state["src_mask"])
        return torch.tanh(self.combine(torch.cat([context, outputs], dim=-1))), weights

    def _feed_step(self, inputs: torch.Tensor, feed: torch.Tensor, h: torch.Tensor, c: torch.Tensor, state: State):
        """One input-feeding step before the head: embedded inputs (B, 1, E) joined by h~_{t-1} `feed` (B, E), the
        LSTM, attention → attentional state h~_t (B, 1, E), weights (B, 1, S), new (h, c) as (L, B, H)."""
        inputs = torch.cat([inputs, feed.unsqueeze(1)], dim=-1)
        if self.traced_when_compiled and torch.compiler.is_compiling():  # see nmt.models.masked_rnn.rnn_step
            outputs, (h, c) = rnn_step(self.decoder, inputs, (h, c))
        else:
            outputs, (h, c) = self.decoder(inputs, (h, c))
        attentional, weights = self._attend(outputs, state)
        return attentional, weights, h, c

    def step(self, prev_tokens, state, attention: AttentionChoice | None = None):
        inputs = self.dropout(self.tgt_embed(prev_tokens)).unsqueeze(1)
        h, c = state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous()
        if self.input_feeding:
            attentional, weights, h, c = self._feed_step(inputs, state["feed"], h, c, state)
        else:
            outputs, (h, c) = self.decoder(inputs, (h, c))
            attentional, weights = self._attend(outputs, state)
        logits = self.head(self.dropout(attentional))
        new_state = {**state, "h": h.transpose(0, 1), "c": c.transpose(0, 1)}
        if self.input_feeding:
            new_state["feed"] = attentional.squeeze(1)
        return logits.squeeze(1), new_state, weights.squeeze(1) if attention is not None else None

    def forward(self, src, tgt_in, keep=None, targets=None, label_smoothing=0.0, src_lengths=None):
        state = self.encode(src, src_lengths)
        embedded = self.dropout(self.tgt_embed(tgt_in))  # (B, T, E)
        h, c = state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous()
        if self.input_feeding:  # h~_{t-1} feeds step t: the recurrence steps, and the head runs once afterwards
            feed, attentional = state["feed"], []
            for t in range(tgt_in.shape[1]):
                step_attentional, _, h, c = self._feed_step(embedded[:, t:t + 1], feed, h, c, state)
                attentional.append(step_attentional)
                feed = step_attentional.squeeze(1)
            attentional = torch.cat(attentional, dim=1)
        else:  # all steps in one cuDNN call, then attention for all steps in one batched matmul
            outputs, _ = self.decoder(embedded, (h, c))
            attentional = self._attend(outputs, state)[0]
        # The vocabulary projection (most of the FLOPs) once, on the kept positions only, fused with the loss.
        return self.head(self.dropout(select(attentional, keep)), targets, label_smoothing)

    def forward_flops(self, src_len, tgt_len):
        hidden = self.combine.in_features // 2
        key_map = getattr(self.attention, "key_map", None) or getattr(self.attention, "scorer").key_map
        per_src = 2 * (dense_params(self.encoder) + dense_params(key_map))
        # Scores and context: 2·S·H each per target token (concat/local-p add a little more; ignored).
        per_tgt = 2 * (dense_params(self.decoder, self.combine, self.head) + dense_params(self.attention)
                       - dense_params(key_map)) + 4 * src_len * hidden
        return per_src, per_tgt
