"""Token-bucketed batches: sentences of similar length grouped under a padded-token budget, shuffled per epoch."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from nmt.data.dataset import ParallelArrays, ShardedArrays, ragged_arange
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

    def _map(self, move) -> "Batch":
        return Batch(move(self.src), move(self.tgt_in), self.src_tokens, self.tgt_tokens, move(self.keep),
                     move(self.targets))

    def pin_memory(self) -> "Batch":
        """In page-locked memory, so that the copy to a GPU really runs asynchronously (non_blocking from pageable
        memory is a synchronous copy in disguise). Done by the prefetch thread, off the training loop; the pinned
        blocks come from torch's caching host allocator, which reuses them once their copies have run."""
        return self._map(torch.Tensor.pin_memory)

    def to(self, device: torch.device) -> "Batch":
        """On `device` (the copies are asynchronous from pinned memory); on the CPU, the batch itself."""
        if device.type != "cuda":
            return self
        return self._map(lambda t: t.to(device, non_blocking=t.is_pinned()))


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


def padded(flat: np.ndarray, lengths: np.ndarray, prefix: int | None, suffix: int | None) -> np.ndarray:
    """Ragged rows (flat tokens + lengths) as one right-padded (B, longest + markers) matrix, with `prefix` before
    and `suffix` after each row's tokens: a single scatter, not a loop over rows."""
    lengths = np.asarray(lengths, dtype=np.int64)
    first = int(prefix is not None)
    width = int(lengths.max(initial=0)) + first + (suffix is not None)
    out = np.full((len(lengths), width), PAD_ID, dtype=np.int64)
    out[np.repeat(np.arange(len(lengths)), lengths), ragged_arange(lengths) + first] = flat
    if prefix is not None:
        out[:, 0] = prefix
    if suffix is not None:
        out[np.arange(len(lengths)), lengths + first] = suffix
    return out


def collate(arrays: ParallelArrays | ShardedArrays, indices: np.ndarray) -> Batch:
    """Sentences `indices` as a training batch, built with array operations (a batch of thousands of sentences
    costs a few numpy calls, not a Python loop)."""
    rows = arrays.gather(np.asarray(indices, dtype=np.int64))
    tgt_out = padded(rows.target, rows.target_lengths, None, EOS_ID)
    # Found here on the host, where the lengths are known, so the device never has to count them: each row's
    # tokens and its EOS, as flat positions in (B, T).
    keep = np.flatnonzero(np.arange(tgt_out.shape[1]) <= rows.target_lengths[:, None])
    return Batch(src=torch.from_numpy(padded(rows.source, rows.source_lengths, None, EOS_ID)),
                 tgt_in=torch.from_numpy(padded(rows.target, rows.target_lengths, BOS_ID, None)),
                 src_tokens=int(rows.source_lengths.sum()) + len(indices),
                 tgt_tokens=int(rows.target_lengths.sum()) + len(indices),
                 keep=torch.from_numpy(keep), targets=torch.from_numpy(tgt_out.reshape(-1)[keep]))


def source_batch(rows: list[list[int]]) -> torch.Tensor:
    """Encoded source sentences → (B, S) ids with EOS, for translation."""
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64)
    return torch.from_numpy(padded(flat, np.array([len(r) for r in rows], dtype=np.int64), None, EOS_ID))
