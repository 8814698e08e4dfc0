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
    src_tokens: int  # non-pad counts, for throughput and loss normalization
    tgt_tokens: int
    # The expected outputs (target ids + EOS, shifted one left of tgt_in) only where they are not padding: the flat
    # indices into (B, T) of those positions, and the ids there. Only these go to the device.
    keep: torch.Tensor  # (tgt_tokens,)
    targets: torch.Tensor  # (tgt_tokens,)

    def to(self, device: torch.device) -> "Batch":
        """To `device`; for a GPU through pinned memory, so that the copy really runs asynchronously
        (non_blocking from pageable memory is a synchronous copy in disguise)."""
        if device.type != "cuda":
            return self
        move = lambda t: t.pin_memory().to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.src), move(self.tgt_in), self.src_tokens, self.tgt_tokens, move(self.keep),
                     move(self.targets))


# Sentences planned together: the batch plan's memory (~50 bytes a sentence while it is made) stays bounded on a
# corpus of any size. A corpus this size or smaller is planned in one piece, as it always was.
POOL_SENTENCES = 1 << 20


class EpochPlan:
    """One epoch's batches over a corpus of any size, by index (`len`, `plan[i]`), built a pool at a time.

    Pools are consecutive runs of `pool` sentences; each is sorted and cut into batches by `token_batches` (its own
    random stream), the pools come in a random order, and only the pool being read is held. Deterministic in (seed,
    epoch), so exact resume finds batch i again. `lengths(start, stop)` gives (source, target) lengths of a range.
    """

    def __init__(self, lengths, size: int, max_tokens: int, seed: int, epoch: int, shuffle: bool = True,
                 pool: int = POOL_SENTENCES):
        self.lengths, self.max_tokens, self.seed, self.epoch, self.shuffle = lengths, max_tokens, seed, epoch, shuffle
        self.ranges = [(start, min(start + pool, size)) for start in range(0, size, pool)]
        if shuffle and len(self.ranges) > 1:
            order = np.random.default_rng([seed, epoch, len(self.ranges)]).permutation(len(self.ranges))
            self.ranges = [self.ranges[k] for k in order]
        self.pool_ids = list(range(len(self.ranges)))
        self._held: tuple[int, list[np.ndarray]] | None = None
        counts = [len(self._pool(k)) for k in self.pool_ids]  # one pass to count; each pool planned again on use
        self.first = np.cumsum([0] + counts)

    def _pool(self, k: int) -> list[np.ndarray]:
        if self._held is None or self._held[0] != k:
            start, stop = self.ranges[k]
            source, target = self.lengths(start, stop)
            # One pool: exactly the plan of the whole corpus (the stream [seed, epoch]); several: one stream each.
            key = (self.seed, self.epoch) if len(self.ranges) == 1 else (self.seed, self.epoch, start)
            batches = token_batches(source, target, self.max_tokens, *key, shuffle=self.shuffle)
            self._held = (k, [b + start for b in batches] if start else batches)
        return self._held[1]

    def __len__(self) -> int:
        return int(self.first[-1])

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = int(np.searchsorted(self.first, i, side="right")) - 1
        return self._pool(k)[i - int(self.first[k])]


def token_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int, seed: int, epoch: int,
                  *stream: int, shuffle: bool = True) -> list[np.ndarray]:
    """Index arrays, one per batch, with (longest side + 1) · sentences ≤ max_tokens (a longer sentence goes alone).

    Deterministic in (seed, epoch[, *stream]): exact resume regenerates an epoch's batches and skips those done.
    """
    rng = np.random.default_rng([seed, epoch, *stream])
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
    tgt_out = _pad(targets, None, EOS_ID)
    # Found here on the host, where the lengths are known, so the device never has to count them.
    keep = torch.from_numpy(np.flatnonzero(tgt_out.numpy() != PAD_ID))
    return Batch(src=_pad(sources, None, EOS_ID), tgt_in=_pad(targets, BOS_ID, None),
                 src_tokens=sum(map(len, sources)) + len(sources), tgt_tokens=sum(map(len, targets)) + len(targets),
                 keep=keep, targets=tgt_out.view(-1)[keep])


def source_batch(rows: list[list[int]]) -> torch.Tensor:
    """Encoded source sentences → (B, S) ids with EOS, for translation."""
    return _pad([np.asarray(r, dtype=np.int64) for r in rows], None, EOS_ID)
