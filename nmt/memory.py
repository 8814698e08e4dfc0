"""Memory checked before it is allocated: a model (with its gradients and AdamW state and the activations of one
token budget) or a decoding batch (beam × sentences) that cannot fit is a one-line error naming both sizes, not an
allocator traceback or a visit from the OOM killer.

The estimates are lower bounds of the main terms (what is certain to be needed), so a refusal is never a false one;
the check catches a model hundreds of times too large, not one 10% too large.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import torch

from nmt.config import ModelConfig, TrainConfig
from nmt.errors import NMTError

GIB = 2**30
BYTES_PER_TRAINED_PARAMETER = 16  # fp32 weight 4 + gradient 4 + AdamW's two moments 8


def available_bytes(device: torch.device) -> int:
    """What this process may still allocate on `device`: free GPU memory, or the smallest of the CPU's available
    memory, the cgroup's limit and this process's address-space limit."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    limits = [_meminfo_available(), _cgroup_limit(), None if soft == resource.RLIM_INFINITY else soft]
    known = [limit for limit in limits if limit]
    return min(known) if known else sys.maxsize  # nothing to read (no /proc): no limit to check against


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_limit() -> int | None:
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def count_parameters(build) -> int:
    """Parameters of the model `build()` makes, counted on the meta device (nothing allocated); tied matrices once."""
    with torch.device("meta"):
        model = build()
    return sum({id(p): p.numel() for p in model.parameters()}.values())


def training_bytes(parameters: int, cfg: ModelConfig, max_tokens: int, target_vocab: int, averaged: bool = False
                   ) -> int:
    """Parameters with their gradients and AdamW state (and their moving average, `averaged`: train.ema_decay),
    plus the least the activations of one batch take: the logits (and their gradient) of every target position,
    and one hidden vector per token per layer."""
    width = max(cfg.embed_dim, cfg.hidden_size if cfg.arch != "transformer" else cfg.embed_dim)
    logits = 2 * max_tokens * target_vocab * 4
    hidden = 2 * max_tokens * cfg.num_layers * 2 * width * 4
    return parameters * (BYTES_PER_TRAINED_PARAMETER + (4 if averaged else 0)) + logits + hidden


def packed_mask_bytes(pack_length: int, max_tokens: int) -> int:
    """The least the SDPA masks of one batch of packed rows take (nmt.models.transformer.PackedMasks): the encoder's,
    decoder's and cross-attention's booleans, a row's square each, and the decoder's causal square; SDPA then takes a
    mask as one of floats, 2 bytes an entry at the least. A row of 65,536 positions needed tens of GiB: an OOM kill."""
    rows = max(max_tokens // pack_length, 1)
    square = pack_length * pack_length
    return rows * square * (3 + 2) + square


def check_fits(what: str, needed: int, device: torch.device, hint: str) -> None:
    free = available_bytes(device)
    if needed > free:
        raise NMTError(f"{what} needs at least {needed / GIB:,.1f} GiB but {device.type} has {free / GIB:,.1f} GiB "
                       f"available; {hint}")


def check_training_fits(parameters: int, model: ModelConfig, train: TrainConfig, target_vocab: int,
                        device: torch.device) -> None:
    """Refuse a model, or packed rows' attention masks, that cannot fit the device, before either is allocated."""
    check_fits(f"training the model ({parameters:,} parameters, AdamW, train.max_tokens {train.max_tokens})",
               training_bytes(parameters, model, train.max_tokens, target_vocab, bool(train.ema_decay)), device,
               "shrink model.embed_dim, model.ff_dim, model.hidden_size or model.num_layers, or train.max_tokens")
    if train.pack_length and train.packed_attention == "sdpa":  # flex's block masks grow as the row does
        check_fits(f"attention masks of packed rows (train.pack_length {train.pack_length}, train.max_tokens "
                   f"{train.max_tokens})", packed_mask_bytes(train.pack_length, train.max_tokens), device,
                   "lower train.pack_length (rows of 128 to 1,024 positions pack sentences as well) or use "
                   "train.packed_attention: flex")


def decode_rows_that_fit(bytes_per_row: int, device: torch.device, share: float = 0.5) -> int:
    """How many hypothesis rows (sentences × beam) a decoding batch may hold within `share` of what is available."""
    return max(0, int(available_bytes(device) * share // max(bytes_per_row, 1)))
