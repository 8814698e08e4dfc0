"""Transformer encoder–decoder (Vaswani et al. 2017) with SDPA attention, pre-/post-LN and a key/value cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nmt.data.batching import Packing
from nmt.data.tokenizer import PAD_ID
from nmt.errors import NMTError
from nmt.models.attention import MultiHeadAttention
from nmt.models.base import AttentionChoice, EncoderDecoder, OutputHead, State, dense_params, padding_mask, select
from nmt.models.dropout import Dropout
from nmt.models.flex_masks import FlexPackedMasks


def bf16_autocast(device_type: str) -> bool:
    return torch.is_autocast_enabled(device_type) and torch.get_autocast_dtype(device_type) == torch.bfloat16


class PositionalEncoding(nn.Module):
    """Sinusoidal positions added to scaled embeddings; `offset` gives the position of the first token. With
    `bf16_residual`, the sum (the residual stream's start) leaves in bf16 under bf16 autocast."""

    def __init__(self, dim: int, dropout: float, max_len: int = 1024, bf16_residual: bool = False):
        super().__init__()
        self.bf16_residual = bf16_residual
        position = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        table = torch.zeros(max_len, dim)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
        self.register_buffer("table", table, persistent=False)
        self.dropout, self.scale = Dropout(dropout), math.sqrt(dim)

    def forward(self, embedded: torch.Tensor, offset: int = 0, positions: torch.Tensor | None = None) -> torch.Tensor:
        """`positions` (B, L): each token's own position (packed rows, where they restart per sentence)."""
        if positions is not None:
            return self.dropout(self._stream(embedded * self.scale + self.table[positions]))
        end = offset + embedded.shape[1]
        if end > len(self.table):  # configs are checked at load time; this guards direct library use
            raise NMTError(f"sequence of {end} positions exceeds model.max_positions {len(self.table)}")
        return self.dropout(self._stream(embedded * self.scale + self.table[offset:end]))

    def _stream(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16) if self.bf16_residual and bf16_autocast(x.device.type) else x


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm that keeps a bf16/fp16 input in its own dtype under autocast, which would upcast it and hand fp32
    on (the kernel accumulates its statistics in fp32 either way); the fp32 weight and bias are cast to the input's
    dtype, since a CUDA LayerNorm takes one. An fp32 input (the default residual stream) takes nn.LayerNorm's path.
    The same parameters and state dict as nn.LayerNorm."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == self.weight.dtype:
            return super().forward(x)
        with torch.autocast(x.device.type, enabled=False):
            return F.layer_norm(x, self.normalized_shape, self.weight.to(x.dtype), self.bias.to(x.dtype), self.eps)


class Residual(nn.Module):
    """x + dropout(f(LN(x))) (pre-LN) or LN(x + dropout(f(x))) (post-LN)."""

    def __init__(self, dim: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = LayerNorm(dim), Dropout(dropout), pre_norm

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


@dataclass(frozen=True)
class DropoutRates:
    """Where the Transformer drops: the residual branches and embeddings (`model.dropout`), the attention
    probabilities and the feed-forward's hidden activations (fairseq's --attention-dropout and
    --activation-dropout; the Annotated Transformer drops all three at one rate)."""

    residual: float
    attention: float
    activation: float

    @classmethod
    def of(cls, dropout: float, attention: float | None = None, activation: float | None = None) -> DropoutRates:
        """Unset rates follow `dropout`."""
        return cls(dropout, dropout if attention is None else attention, dropout if activation is None else activation)


def feed_forward(dim: int, ff_dim: int, dropout: float) -> nn.Module:
    return nn.Sequential(nn.Linear(dim, ff_dim), nn.ReLU(), Dropout(dropout), nn.Linear(ff_dim, dim))


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: DropoutRates, pre_norm: bool):
        super().__init__()
        self.self_attn = MultiHeadAttention(dim, heads, dropout.attention)
        self.ff = feed_forward(dim, ff_dim, dropout.activation)
        self.res_attn, self.res_ff = (Residual(dim, dropout.residual, pre_norm) for _ in range(2))

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
        x = self.res_attn(x, lambda h: self.self_attn.attend(self.self_attn.project_query(h),
                                                             *self.self_attn.project_keys_values(h), src_mask,
                                                             allowed=allowed)[0])
        return self.res_ff(x, self.ff)


class DecoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: DropoutRates, pre_norm: bool):
        super().__init__()
        self.self_attn = MultiHeadAttention(dim, heads, dropout.attention)
        self.cross_attn = MultiHeadAttention(dim, heads, dropout.attention)
        self.ff = feed_forward(dim, ff_dim, dropout.activation)
        self.res_self, self.res_cross, self.res_ff = (Residual(dim, dropout.residual, pre_norm) for _ in range(3))

    def forward(self, x, cross_k, cross_v, src_mask, cache: tuple | None = None, need_weights: bool = False,
                masks: PackedMasks | FlexPackedMasks | None = None, cross_bias: torch.Tensor | None = None):
        """x (B, T, D); cross_k/v (B, H, S, Dh). With `cache` (past k, v), x holds only the new token(s).
        With `masks` (packed rows), they decide what each query sees, causality included. `cross_bias` (B, 1, 1, S),
        `attention_bias` of the source padding, replaces `src_mask` (decoding: made once per batch)."""
        new_cache, weights = None, None

        def self_attention(h):
            nonlocal new_cache
            q = self.self_attn.project_query(h)
            k, v = self.self_attn.project_keys_values(h)
            if cache is not None:
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
                new_cache = (k, v)
            # With a cache the single new query may see every cached key: no causal mask needed.
            if masks is not None:
                return self.self_attn.attend(q, k, v, allowed=masks.decoder)[0]
            return self.self_attn.attend(q, k, v, is_causal=cache is None)[0]

        def cross_attention(h):
            nonlocal weights
            context, weights = self.cross_attn.attend(self.cross_attn.project_query(h), cross_k, cross_v, src_mask,
                                                      need_weights=need_weights,
                                                      allowed=cross_bias if masks is None else masks.cross)
            return context

        x = self.res_self(x, self_attention)
        x = self.res_cross(x, cross_attention)
        return self.res_ff(x, self.ff), new_cache, weights


def attention_bias(padding: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, S) source padding → (B, 1, 1, S) additive mask: 0 where a key may be seen, -inf at padding. Made once per
    decoded batch: given a boolean mask, SDPA would invert and convert it in every layer at every step (4 kernels a
    layer: a Transformer decoding step launched 138 with it, 114 without, results/decode-step-operators-transformer-
    cpu-bf16.json)."""
    bias = torch.zeros(padding.shape, dtype=dtype, device=padding.device).masked_fill_(padding, float("-inf"))
    return bias[:, None, None, :]


@dataclass
class PackedMasks:
    """What each query may see in packed rows (nmt.data.batching.Packing), (B, 1, T, S) for SDPA: its own sentence,
    earlier positions only in the decoder. Padding (segment -1) sees padding, and the decoder's padding sees the
    whole source row, so that no query is left without a key (an all-masked softmax row is NaN, and a NaN value
    spreads through the weights' zeros)."""

    encoder: torch.Tensor
    decoder: torch.Tensor
    cross: torch.Tensor

    @classmethod
    def of(cls, packing: Packing) -> "PackedMasks":
        src, tgt = packing.src_segments, packing.tgt_segments
        length = tgt.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=tgt.device).tril()
        cross = (tgt[:, :, None] == src[:, None, :]) | (tgt < 0)[:, :, None]
        return cls(encoder=(src[:, :, None] == src[:, None, :]).unsqueeze(1),
                   decoder=((tgt[:, :, None] == tgt[:, None, :]) & causal).unsqueeze(1), cross=cross.unsqueeze(1))


class Transformer(EncoderDecoder):
    def __init__(self, src_embed: nn.Embedding, tgt_embed: nn.Embedding, num_layers: int, num_heads: int,
                 ff_dim: int, dropout: DropoutRates, pre_norm: bool, tie_output: bool,
                 max_positions: int = 1024, bf16_residual: bool = False):
        super().__init__()
        dim = tgt_embed.embedding_dim
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self._init_embeddings()  # first, so a seed gives the same weights as when the builder did this
        self.positions = PositionalEncoding(dim, dropout.residual, max_positions, bf16_residual)
        self.encoder_layers = nn.ModuleList(EncoderLayer(dim, num_heads, ff_dim, dropout, pre_norm)
                                            for _ in range(num_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(dim, num_heads, ff_dim, dropout, pre_norm)
                                            for _ in range(num_layers))
        # Pre-LN stacks end with a LayerNorm; post-LN outputs are already normalized.
        self.encoder_norm = LayerNorm(dim) if pre_norm else nn.Identity()
        self.decoder_norm = LayerNorm(dim) if pre_norm else nn.Identity()
        self.head = OutputHead(dim, tgt_embed.num_embeddings, tgt_embed if tie_output else None)
        self.packed_attention = "sdpa"  # packed rows' attention kernel: train.packed_attention (the Trainer sets it)

    def compile_regions(self, static_shapes: bool) -> list[nn.Module]:
        """What train.compile_scope layers compiles (nmt.compile_model.compile_regions): the repeated layers, and
        the output head with its fused loss when the targets are a fixed number (its block loop follows the count)."""
        return [*self.encoder_layers, *self.decoder_layers, *([self.head] if static_shapes else [])]

    def _init_embeddings(self) -> None:
        # N(0, d^-1/2) so that embeddings scaled by sqrt(d) have unit variance, like the positions they meet.
        for embed in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(embed.weight, mean=0.0, std=embed.embedding_dim**-0.5)
            with torch.no_grad():
                embed.weight[PAD_ID].zero_()

    @property
    def attention_layers_heads(self) -> tuple[int, int]:
        return len(self.decoder_layers), self.decoder_layers[0].cross_attn.num_heads

    @property
    def max_target_positions(self) -> int:  # type: ignore[override]
        return len(self.positions.table)

    def encode_memory(self, src: torch.Tensor, packing: Packing | None = None, masks: PackedMasks | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) → memory (B, S, D), src_mask (B, S)."""
        mask = padding_mask(src)
        x = self.positions(self.src_embed(src), positions=None if packing is None else packing.src_positions)
        for layer in self.encoder_layers:
            x = layer(x, mask, allowed=None if masks is None else masks.encoder)
        return self.encoder_norm(x), mask

    def encode(self, src: torch.Tensor) -> State:
        memory, mask = self.encode_memory(src)
        state: State = {}
        batch, heads = src.shape[0], self.decoder_layers[0].self_attn.num_heads
        for i, layer in enumerate(self.decoder_layers):
            # Cross-attention keys/values once per sentence; an empty self-attention cache that grows per step.
            state[f"cross_k{i}"], state[f"cross_v{i}"] = layer.cross_attn.project_keys_values(memory)
            empty = memory.new_zeros(batch, heads, 0, layer.self_attn.head_dim)
            state[f"self_k{i}"], state[f"self_v{i}"] = empty, empty
        # In the keys' dtype (autocast's, when on): the one SDPA wants a float mask in.
        state["cross_bias"] = attention_bias(mask, state["cross_k0"].dtype)
        return state

    def step(self, prev_tokens, state, attention: AttentionChoice | None = None):
        offset = state["self_k0"].shape[2]
        x = self.positions(self.tgt_embed(prev_tokens).unsqueeze(1), offset=offset)
        new_state = dict(state)
        chosen = attention.layer % len(self.decoder_layers) if attention is not None else -1
        returned = None
        for i, layer in enumerate(self.decoder_layers):
            x, (k, v), weights = layer(x, state[f"cross_k{i}"], state[f"cross_v{i}"], None,
                                       cache=(state[f"self_k{i}"], state[f"self_v{i}"]), need_weights=i == chosen,
                                       cross_bias=state["cross_bias"])
            new_state[f"self_k{i}"], new_state[f"self_v{i}"] = k, v
            if weights is not None:  # (B, H, 1, S)
                returned = (weights.mean(1) if attention.head is None else weights[:, attention.head]).squeeze(1)
        return self.head(self.decoder_norm(x)).squeeze(1), new_state, returned

    def forward(self, src, tgt_in, keep=None, targets=None, label_smoothing=0.0, packing: Packing | None = None):
        """Teacher forcing; with `packing`, rows of several sentences that attend only within themselves."""
        masks = None if packing is None else \
            (FlexPackedMasks if self.packed_attention == "flex" else PackedMasks).of(packing)
        memory, mask = self.encode_memory(src, packing, masks)
        x = self.positions(self.tgt_embed(tgt_in), positions=None if packing is None else packing.tgt_positions)
        for layer in self.decoder_layers:
            k, v = layer.cross_attn.project_keys_values(memory)
            x = layer(x, k, v, mask, masks=masks)[0]
        # The vocabulary projection, the largest matmul here, only where a loss is taken (not over padding).
        return self.head(select(self.decoder_norm(x), keep), targets, label_smoothing)

    def forward_flops(self, src_len, tgt_len):
        dim, layers = self.tgt_embed.embedding_dim, len(self.decoder_layers)
        cross_kv = sum(layer.cross_attn.kv_proj.weight.numel() for layer in self.decoder_layers)
        # Per token: 2 FLOPs per weight, plus QK^T and AV (2·2·length·d per layer and attention).
        per_src = 2 * (dense_params(self.encoder_layers) + cross_kv) + layers * 4 * src_len * dim
        per_tgt = 2 * (dense_params(self.decoder_layers) - cross_kv + self.head.weight.numel()) \
            + layers * 4 * (tgt_len + src_len) * dim
        return per_src, per_tgt
