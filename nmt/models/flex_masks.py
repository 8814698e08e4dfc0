"""`train.packed_attention: flex`: packed rows' attention through FlexAttention instead of SDPA with a mask.

SDPA takes a packed row's block-diagonal mask as a (B, 1, T, S) tensor, which rules out its flash kernels: the H200's
32k update spent 9.6 of its 43.6 ms in the memory-efficient kernels that read it (docs/gpu.md). FlexAttention
generates one Triton kernel that evaluates the mask from the rows' segment ids as it goes, nothing materialized.
It has no dropout (the attention dropout must be 0) and no backward on a CPU, so it trains on a GPU only; decoding
never packs rows and keeps SDPA.

Every tile of the (T, S) grid is given as partly masked: a row of 128 positions is one tile, and finding the tiles a
sentence never reaches would cost more than it saves. So the block mask is a fixed shape, built without a host sync,
and a captured update can replay it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from nmt.data.batching import Packing

_compiled_flex: Callable | None = None


def flex_attention_available() -> bool:
    try:
        from torch.nn.attention.flex_attention import BlockMask, flex_attention  # noqa: F401  (torch >= 2.5)
    except ImportError:
        return False
    return True


def flex_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: Any) -> torch.Tensor:
    """q (B, H, T, Dh), k/v (B, H, S, Dh) → (B, H, T, Dh). FlexAttention compiled once per process: called
    uncompiled it materializes every score (PyTorch's own warning says so), slower than the SDPA it replaces."""
    global _compiled_flex
    if _compiled_flex is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex(q, k, v, block_mask=block_mask)


def _every_tile(batch: int, q_len: int, kv_len: int, mask_mod: Callable, device: torch.device, block: int = 128):
    """A BlockMask in which every (block x block) tile is partly masked: mask_mod decides each position."""
    from torch.nn.attention.flex_attention import BlockMask

    q_blocks, kv_blocks = -(-q_len // block), -(-kv_len // block)
    counts = torch.full((batch, 1, q_blocks), kv_blocks, dtype=torch.int32, device=device)
    indices = torch.arange(kv_blocks, dtype=torch.int32, device=device).expand(batch, 1, q_blocks, kv_blocks)
    return BlockMask.from_kv_blocks(counts, indices.contiguous(), BLOCK_SIZE=block, mask_mod=mask_mod,
                                    seq_lengths=(q_len, kv_len))


@dataclass
class FlexPackedMasks:
    """PackedMasks' rules (nmt.models.transformer) as FlexAttention block masks: a query sees its own sentence,
    earlier positions only in the decoder; padding (segment -1) sees padding, the decoder's padding the whole source
    row, so that no query is left without a key."""

    encoder: Any
    decoder: Any
    cross: Any

    @classmethod
    def of(cls, packing: Packing) -> FlexPackedMasks:
        src, tgt = packing.src_segments, packing.tgt_segments
        batch, src_len, tgt_len = src.shape[0], src.shape[1], tgt.shape[1]

        def encoder(b, h, q, kv):
            return src[b, q] == src[b, kv]

        def decoder(b, h, q, kv):
            return (tgt[b, q] == tgt[b, kv]) & (q >= kv)

        def cross(b, h, q, kv):
            return (tgt[b, q] == src[b, kv]) | (tgt[b, q] < 0)

        return cls(encoder=_every_tile(batch, src_len, src_len, encoder, src.device),
                   decoder=_every_tile(batch, tgt_len, tgt_len, decoder, src.device),
                   cross=_every_tile(batch, tgt_len, src_len, cross, src.device))
