"""Attention mechanisms behind one interface.

Every attention takes (query, keys, values, key_padding_mask) and returns (context, weights):
    query (B, T, Dq), keys (B, S, Dk), values (B, S, Dv), key_padding_mask (B, S) bool, True at padding
    → context (B, T, Dv), weights (B, T, S) (or None where not asked for and not free, see MultiHeadAttention).
`prepare_keys` turns encoder outputs into the keys the scorer wants; callers run it once per sentence, not per step.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nmt.models.flex_masks import flex_attend


def masked_softmax(scores: torch.Tensor, key_padding_mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis with padded keys excluded. scores (B, T, S), mask (B, S)."""
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask.unsqueeze(1), float("-inf"))
    return torch.softmax(scores, dim=-1)


class ScoredAttention(nn.Module):
    """Softmax over a scorer's (B, T, S) scores, then the weighted sum of values; subclasses define `scores`."""

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.key_map(keys)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, query, keys, values, key_padding_mask=None):
        weights = masked_softmax(self.scores(query, keys), key_padding_mask)
        return torch.bmm(weights, values), weights


class DotAttention(ScoredAttention):
    """Luong `dot` (identity key map) and `general` (keys mapped by W_a once per sentence) scoring."""

    def __init__(self, query_dim: int, key_dim: int, general: bool):
        super().__init__()
        if not general and query_dim != key_dim:
            raise ValueError("dot attention needs query_dim == key_dim")
        self.key_map = nn.Linear(key_dim, query_dim, bias=False) if general else nn.Identity()

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return torch.bmm(query, keys.transpose(1, 2))


class AdditiveAttention(ScoredAttention):
    """Bahdanau's MLP scorer v^T tanh(W_q q + W_k k), also Luong's `concat`."""

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int):
        super().__init__()
        self.key_map = nn.Linear(key_dim, hidden_dim, bias=False)
        self.query_map = nn.Linear(query_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def scores(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        # (B, T, 1, A) + (B, 1, S, A) → (B, T, S)
        return self.v(torch.tanh(self.query_map(query).unsqueeze(2) + keys.unsqueeze(1))).squeeze(-1)


class LocalPAttention(nn.Module):
    """Luong et al. (2015) local-p: predicted centre p_t, window [p_t - D, p_t + D], Gaussian with sigma = D/2."""

    def __init__(self, query_dim: int, key_dim: int, window: int):
        super().__init__()
        self.window = window
        self.scorer = DotAttention(query_dim, key_dim, general=True)
        self.position = nn.Sequential(nn.Linear(query_dim, query_dim, bias=False), nn.Tanh(),
                                      nn.Linear(query_dim, 1, bias=False))

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.scorer.prepare_keys(keys)

    def forward(self, query, keys, values, key_padding_mask=None):
        batch, source_len = keys.shape[0], keys.shape[1]
        if key_padding_mask is None:
            key_padding_mask = torch.zeros(batch, source_len, dtype=torch.bool, device=keys.device)
        lengths = (~key_padding_mask).sum(-1, keepdim=True).to(query.dtype)  # (B, 1)
        centre = (lengths.unsqueeze(1) - 1) * torch.sigmoid(self.position(query))  # (B, T, 1)
        positions = torch.arange(source_len, device=keys.device, dtype=query.dtype).view(1, 1, -1)
        distance = positions - centre  # (B, T, S)
        outside = (distance.abs() > self.window) | key_padding_mask.unsqueeze(1)
        scores = self.scorer.scores(query, keys).masked_fill(outside, float("-inf"))
        sigma = self.window / 2
        weights = torch.softmax(scores, dim=-1) * torch.exp(-distance.pow(2) / (2 * sigma**2))
        return torch.bmm(weights, values), weights


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over heads via F.scaled_dot_product_attention (flash/efficient on GPU).

    The projections are exposed (`project_query`, `project_keys_values`) so the decoder can cache keys/values.
    """

    def __init__(self, dim: int, num_heads: int, dropout: float):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"embed_dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads, self.head_dim, self.dropout = num_heads, dim // num_heads, dropout
        self.q_proj = nn.Linear(dim, dim)
        self.kv_proj = nn.Linear(dim, 2 * dim)
        self.out_proj = nn.Linear(dim, dim)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) → (B, H, T, Dh)
        return x.view(x.shape[0], x.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def project_query(self, query: torch.Tensor) -> torch.Tensor:
        return self._heads(self.q_proj(query))

    def project_keys_values(self, keys: torch.Tensor, values: torch.Tensor | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor]:
        """keys (B, S, D) [, values (B, S, D)] → k, v (B, H, S, Dh); one fused matmul when they are one tensor."""
        if values is None or values is keys:
            k, v = self.kv_proj(keys).chunk(2, dim=-1)
        else:
            w_k, w_v = self.kv_proj.weight.chunk(2, dim=0)
            b_k, b_v = self.kv_proj.bias.chunk(2, dim=0)
            k, v = F.linear(keys, w_k, b_k), F.linear(values, w_v, b_v)
        return self._heads(k), self._heads(v)

    def attend(self, q, k, v, key_padding_mask=None, is_causal=False, need_weights=False, allowed=None):
        """q (B, H, T, Dh), k/v (B, H, S, Dh) → context (B, T, D), weights (B, H, T, S) or None.
        `allowed` (B, 1, T, S), True where a query may see a key, or an additive float mask (0 or -inf, in q's
        dtype), replaces key_padding_mask (packed rows; decoding's `attention_bias`); or a FlexAttention block mask
        (packed rows under train.packed_attention flex: nmt.models.flex_masks, no dropout)."""
        if allowed is not None and not isinstance(allowed, torch.Tensor):
            context = flex_attend(q, k, v, allowed)
            return self.out_proj(context.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)), None
        mask = allowed if allowed is not None else \
            None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
        if need_weights:
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores + mask if mask.is_floating_point() else scores.masked_fill(~mask, float("-inf"))
            if is_causal:
                causal = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril()
                scores = scores.masked_fill(~causal, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            context = F.dropout(weights, self.dropout, self.training) @ v
        else:
            weights = None
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal,
                                                     dropout_p=self.dropout if self.training else 0.0)
        batch, _, length, _ = context.shape
        return self.out_proj(context.transpose(1, 2).reshape(batch, length, -1)), weights

    def forward(self, query, keys, values, key_padding_mask=None, is_causal=False, need_weights=False):
        """The shared signature: query (B, T, D), keys/values (B, S, D) → context (B, T, D), weights (B, H, T, S)."""
        k, v = self.project_keys_values(keys, values)
        return self.attend(self.project_query(query), k, v, key_padding_mask, is_causal, need_weights)
