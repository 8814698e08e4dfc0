"""Token-bucketed batches: sentences of similar length grouped under a padded-token budget, shuffled per epoch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from nmt.data.dataset import ParallelArrays
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids + EOS, right-padded
    tgt_in: torch.Tensor  # (B, T) BOS + target ids
    tgt_out: torch.Tensor  # (B, T) target ids + EOS
    src_tokens: int  # non-pad counts, for throughput and loss normalization
    tgt_tokens: int

    def to(self, device: torch.device) -> "Batch":
        """To `device`; for a GPU through pinned memory, so that the copy really runs asynchronously
        (non_blocking from pageable memory is a synchronous copy in disguise)."""
        if device.type != "cuda":
            return self
        move = lambda t: t.pin_memory().to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.src), move(self.tgt_in), move(self.tgt_out), self.src_tokens, self.tgt_tokens)


def token_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int, seed: int, epoch: int,
                  shuffle: bool = True) -> list[np.ndarray]:
    """Index arrays, one per batch, with (longest side + 1) · sentences ≤ max_tokens (a longer sentence goes alone).

    Deterministic in (seed, epoch): exact resume regenerates an epoch's batches and skips those already done.
    """
    rng = np.random.default_rng([seed, epoch])
    tie_break = rng.random(len(src_lengths)) if shuffle else np.arange(len(src_lengths))
    order = np.lexsort((tie_break, tgt_lengths, src_lengths))
    del tie_break
    cost = np.maximum(src_lengths, tgt_lengths).astype(np.int32)[order] + 1
    batches = np.split(order, batch_starts(cost, max_tokens)[1:])
    if shuffle:
        rng.shuffle(batches)
    return batches


def batch_starts(cost: np.ndarray, max_tokens: int) -> np.ndarray:
    """Where each batch begins in `cost` (the padded width of each sentence, in batch order): a batch grows while
    its running maximum × its size stays within `max_tokens`. A loop over batches, each a vectorized look at the
    next sentences (twice the last batch's size, widened until the cut is in view), not a loop over sentences."""
    limit = max_tokens // 2 + 2  # every cost is at least 2: no batch holds more sentences than this
    starts, i, n, window = [], 0, len(cost), 64
    while i < n:
        starts.append(i)
        while True:
            running = np.maximum.accumulate(cost[i:i + window])
            over = running * np.arange(1, len(running) + 1) > max_tokens
            over[0] = False  # the first sentence always goes, alone if it must
            if over.any() or i + window >= n or window >= limit:
                break
            window *= 2
        size = int(np.argmax(over)) if over.any() else len(running)
        i += size
        window = max(16, 2 * size)
    return np.asarray(starts, dtype=np.int64)


def _pad(rows: list[np.ndarray], prefix: int | None, suffix: int | None) -> torch.Tensor:
    extra = (prefix is not None) + (suffix is not None)
    out = np.full((len(rows), max(len(r) for r in rows) + extra), PAD_ID, dtype=np.int64)
    for i, row in enumerate(rows):
        start = 0
        if prefix is not None:
            out[i, 0], start = prefix, 1
        out[i, start:start + len(row)] = row
        if suffix is not None:
            out[i, start + len(row)] = suffix
    return torch.from_numpy(out)


def collate(arrays: ParallelArrays, indices: np.ndarray) -> Batch:
    sources = [arrays.source(i) for i in indices]
    targets = [arrays.target(i) for i in indices]
    return Batch(src=_pad(sources, None, EOS_ID), tgt_in=_pad(targets, BOS_ID, None),
                 tgt_out=_pad(targets, None, EOS_ID), src_tokens=sum(map(len, sources)) + len(sources),
                 tgt_tokens=sum(map(len, targets)) + len(targets))


def source_batch(rows: list[list[int]]) -> torch.Tensor:
    """Encoded source sentences → (B, S) ids with EOS, for translation."""
    return _pad([np.asarray(r, dtype=np.int64) for r in rows], None, EOS_ID)
