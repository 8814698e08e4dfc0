"""Token-bucketed batches: sentences of similar length grouped under a padded-token budget, shuffled per epoch."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

from nmt.data.dataset import ParallelArrays, ShardedArrays, ragged_arange
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Packing:
    """Where each sentence sits in a packed batch (`train.pack_length`): rows hold several sentences one after
    another, and attention stays within a sentence. segments: (B, S) / (B, T) the sentence's number in the batch, -1
    at padding; positions: each token's position within its own sentence (where the position encoding restarts)."""

    src_segments: torch.Tensor
    tgt_segments: torch.Tensor
    src_positions: torch.Tensor
    tgt_positions: torch.Tensor

    def map(self, move) -> "Packing":
        return Packing(*(move(t) for t in (self.src_segments, self.tgt_segments, self.src_positions,
                                            self.tgt_positions)))


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
    sentences: int = 0  # sentences in the batch (rows may be fewer, packed, or more, padded to a static shape)
    packing: Packing | None = None  # None: one sentence per row
    # With `collate(..., longest_source_first=True)`: each row's source length (EOS included), longest first, kept on
    # the host (numpy, which DistributedDataParallel does not move), so that a recurrent encoder packs the batch
    # without asking the device for them (a host sync on a GPU). None: rows in plan order.
    source_lengths: np.ndarray | None = None

    def __post_init__(self):
        self.sentences = self.sentences or len(self.src)

    def _map(self, move) -> "Batch":
        return Batch(move(self.src), move(self.tgt_in), self.src_tokens, self.tgt_tokens, move(self.keep),
                     move(self.targets), self.sentences, self.packing.map(move) if self.packing else None,
                     self.source_lengths)

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the batch, in a fixed order (what `copy_into` copies)."""
        found: list[torch.Tensor] = []
        self._map(lambda t: found.append(t) or t)
        return found

    def copy_into(self, static: "Batch") -> None:
        """Copy these tensors into `static`'s, of the same shapes (a CUDA graph's inputs), without a host sync from
        pinned memory."""
        for target, source in zip(static.tensors(), self.tensors(), strict=True):
            if target.shape != source.shape:
                raise ValueError(f"a batch of shape {tuple(source.shape)} for a static one of {tuple(target.shape)}")
            target.copy_(source, non_blocking=True)

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

    Pools are consecutive runs of `pool` sentences; each is sorted and cut into batches by `token_batches` (or, with
    `pack_length`, shuffled and packed into rows by `packed_batches`) (its own
    random stream), the pools come in a random order, and only the pool being read is held. Deterministic in (seed,
    epoch), so exact resume finds batch i again. `lengths(start, stop)` gives (source, target) lengths of a range.
    """

    def __init__(self, lengths, size: int, max_tokens: int, seed: int, epoch: int, shuffle: bool = True,
                 pool: int = POOL_SENTENCES, length_multiple: int = 0, pack_length: int = 0):
        self.lengths, self.max_tokens, self.seed, self.epoch, self.shuffle = lengths, max_tokens, seed, epoch, shuffle
        self.length_multiple, self.pack_length = length_multiple, pack_length
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
            if self.pack_length:
                batches = packed_batches(source, target, self.pack_length, rows_per_batch(self.pack_length,
                                         self.max_tokens), *key, shuffle=self.shuffle)
            else:
                batches = token_batches(source, target, self.max_tokens, *key, shuffle=self.shuffle,
                                        length_multiple=self.length_multiple)
            self._held = (k, [b.shifted(start) if isinstance(b, PackedPlan) else b + start for b in batches]
                          if start else batches)
        return self._held[1]

    def __len__(self) -> int:
        return int(self.first[-1])

    def __getitem__(self, i: int) -> np.ndarray | PackedPlan:
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = int(np.searchsorted(self.first, i, side="right")) - 1
        return self._pool(k)[i - int(self.first[k])]


def token_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int, seed: int, epoch: int,
                  *stream: int, shuffle: bool = True, length_multiple: int = 0) -> list[np.ndarray]:
    """Index arrays, one per batch, with (longest side + 1) · sentences ≤ max_tokens (a longer sentence goes alone).
    With `length_multiple` k > 0, each batch holds sentences of one padded width (longest side + 1 rounded up to a
    multiple of k), at most max_tokens // width of them: the static shapes of `static_shape`.

    Deterministic in (seed, epoch[, *stream]): exact resume regenerates an epoch's batches and skips those done.
    """
    rng = np.random.default_rng([seed, epoch, *stream])
    tie_break = rng.random(len(src_lengths)) if shuffle else np.arange(len(src_lengths))
    cost = pair_costs(src_lengths, tgt_lengths, length_multiple)
    if length_multiple:
        order = np.lexsort((tie_break, tgt_lengths, src_lengths, cost))
        cost = cost[order]
        starts = static_batch_starts(cost, max_tokens)
    else:
        order = np.lexsort((tie_break, tgt_lengths, src_lengths))
        cost = cost[order]
        starts = batch_starts(cost, max_tokens)
    del tie_break
    batches = np.split(order, starts[1:])
    if shuffle:
        rng.shuffle(batches)
    return batches


# Rows filled at once by the packer: first fit over 4 open rows needs ~3.6% fewer rows of 128 than next fit on
# transformer.yaml's data; 2 get most of that, 8 add 0.1% (results/packing-fill-simulation-transformer-cpu-bf16.json).
OPEN_ROWS = 4


@dataclass(frozen=True)
class PackedPlan:
    """One packed batch: the sentences (corpus indices) row by row, and the row of the batch each one goes to."""

    sentences: np.ndarray
    rows: np.ndarray

    def __len__(self) -> int:
        return len(self.sentences)

    def shifted(self, start: int) -> "PackedPlan":
        return PackedPlan(self.sentences + start, self.rows)


def packed_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, pack_length: int, rows: int, seed: int,
                   epoch: int, *stream: int, shuffle: bool = True) -> list[PackedPlan]:
    """Batches of `rows` rows of `pack_length` positions on each side: the sentences in a random order
    (deterministic in seed, epoch[, *stream]), each placed in the first of the open rows it fits on both sides
    (`first_fit_rows`); rows are numbered as they close, and each batch takes the next `rows` of them."""
    rng = np.random.default_rng([seed, epoch, *stream])
    order = rng.permutation(len(src_lengths)) if shuffle else np.arange(len(src_lengths))
    row_of = first_fit_rows(src_lengths[order] + 1, tgt_lengths[order] + 1, pack_length)
    by_row = np.argsort(row_of, kind="stable")  # row by row, each row's sentences in the shuffled order
    sentences, row_of = order[by_row], row_of[by_row]
    cuts = np.flatnonzero(np.diff(row_of // rows)) + 1
    return [PackedPlan(batch, batch_rows % rows)
            for batch, batch_rows in zip(np.split(sentences, cuts), np.split(row_of, cuts))]


def first_fit_rows(src_span: np.ndarray, tgt_span: np.ndarray, pack_length: int,
                   open_rows: int = OPEN_ROWS) -> np.ndarray:
    """The row of each sentence taking `src_span`/`tgt_span` positions (tokens + one marker), in order: each goes to
    the first of up to `open_rows` rows with room for it on both sides; when none has, the fullest row closes and a
    new one opens. Rows are numbered in the order they close (those still open at the end last, oldest first). A
    sentence longer than a row gets a row to itself (the trainer refuses such a pack_length before it gets here).
    A loop over sentences: ~0.04 s more an epoch of 161k than next fit's vectorized cuts, which left ~3.9% more
    batches (results/collate-layouts-transformer-first-fit-cpu-bf16.json)."""
    row_of = np.empty(len(src_span), dtype=np.int64)
    open_src: list[int] = []
    open_tgt: list[int] = []
    members: list[list[int]] = []
    closed = 0

    def close(k: int) -> None:
        nonlocal closed
        row_of[members[k]] = closed
        closed += 1
        del open_src[k], open_tgt[k], members[k]

    for i, (s, t) in enumerate(zip(src_span.tolist(), tgt_span.tolist())):
        for k in range(len(members)):
            if open_src[k] + s <= pack_length and open_tgt[k] + t <= pack_length:
                open_src[k] += s
                open_tgt[k] += t
                members[k].append(i)
                break
        else:
            if len(members) == open_rows:
                close(max(range(open_rows), key=lambda k: max(open_src[k], open_tgt[k])))
            open_src.append(s)
            open_tgt.append(t)
            members.append([i])
    while members:
        close(0)
    return row_of


def pair_costs(src_lengths: np.ndarray, tgt_lengths: np.ndarray, length_multiple: int = 0) -> np.ndarray:
    """What each pair takes of a batch's max_tokens: its longer side and the marker, rounded up to a multiple of
    `length_multiple` (static shapes) when that is set."""
    cost = np.maximum(src_lengths, tgt_lengths).astype(np.int32) + 1
    return round_up(cost, length_multiple) if length_multiple else cost


def round_up(n, multiple: int):
    return -(-n // multiple) * multiple


def rows_per_batch(width: int, max_tokens: int) -> int:
    return max(1, max_tokens // width)


def static_batch_starts(width: np.ndarray, max_tokens: int) -> np.ndarray:
    """Where each batch begins in `width` (sorted): a new batch at every change of width and every
    max_tokens // width sentences within one."""
    runs = np.flatnonzero(np.r_[True, width[1:] != width[:-1]]).tolist() + [len(width)]
    starts = [np.arange(start, stop, rows_per_batch(int(width[start]), max_tokens))
              for start, stop in zip(runs[:-1], runs[1:])]
    return np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)


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


def padded(flat: np.ndarray, lengths: np.ndarray, prefix: int | None, suffix: int | None,
           width: int | None = None, rows: int | None = None) -> np.ndarray:
    """Ragged rows (flat tokens + lengths) as one right-padded (B, longest + markers) matrix, with `prefix` before
    and `suffix` after each row's tokens: a single scatter, not a loop over rows. `width` and `rows` pad it further
    (to a static shape); the extra rows hold only the prefix (if any) and padding."""
    lengths = np.asarray(lengths, dtype=np.int64)
    first = int(prefix is not None)
    width = width or int(lengths.max(initial=0)) + first + (suffix is not None)
    out = np.full((rows or len(lengths), width), PAD_ID, dtype=np.int64)
    out[np.repeat(np.arange(len(lengths)), lengths), ragged_arange(lengths) + first] = flat
    if prefix is not None:
        out[:, 0] = prefix
    if suffix is not None:
        out[np.arange(len(lengths)), lengths + first] = suffix
    return out


@dataclass(frozen=True)
class StaticShapes:
    """Batches padded to (max_tokens // width, width), width = longest side + 1 rounded up to `length_multiple`."""

    length_multiple: int
    max_tokens: int

    def shape(self, source_lengths: np.ndarray, target_lengths: np.ndarray) -> tuple[int, int]:
        longest = int(max(source_lengths.max(initial=0), target_lengths.max(initial=0)))
        width = round_up(longest + 1, self.length_multiple)
        return max(rows_per_batch(width, self.max_tokens), len(source_lengths)), width

    def width_count(self, source_lengths: np.ndarray, target_lengths: np.ndarray) -> int:
        """How many batch widths these sentences make (each is one compiled graph)."""
        return len(self.widths(source_lengths, target_lengths))

    def widths(self, source_lengths: np.ndarray, target_lengths: np.ndarray) -> np.ndarray:
        """The batch widths these sentences make, each once."""
        longest = np.maximum(source_lengths, target_lengths).astype(np.int64) + 1
        return np.unique(round_up(longest, self.length_multiple))


def collate(arrays: ParallelArrays | ShardedArrays, indices: np.ndarray, static: StaticShapes | None = None,
            longest_source_first: bool = False) -> Batch:
    """Sentences `indices` as a training batch, built with array operations (a batch of thousands of sentences
    costs a few numpy calls, not a Python loop). With `static`, the batch has that static shape: every position
    goes to the loss, padding with target PAD_ID (which the loss ignores), so `keep` and `targets` keep a fixed
    size too. With `longest_source_first`, the rows are ordered by source length, longest first (ties in plan
    order), and the batch carries those lengths on the host: what packing a recurrent encoder's input needs."""
    rows = arrays.gather(np.asarray(indices, dtype=np.int64))
    if longest_source_first:
        rows = rows.take(np.argsort(-rows.source_lengths, kind="stable"))
    n, width = static.shape(rows.source_lengths, rows.target_lengths) if static else (None, None)
    tgt_out = padded(rows.target, rows.target_lengths, None, EOS_ID, width, n)
    if static:
        keep = np.arange(tgt_out.size)
    else:  # found here on the host, where the lengths are known, so the device never has to count them: each
        # row's tokens and its EOS, as flat positions in (B, T)
        keep = np.flatnonzero(np.arange(tgt_out.shape[1]) <= rows.target_lengths[:, None])
    src = padded(rows.source, rows.source_lengths, None, EOS_ID, width, n)
    src[len(indices):, 0] = EOS_ID  # a static shape's empty rows: a one-token source, so attention stays defined
    return Batch(src=torch.from_numpy(src),
                 tgt_in=torch.from_numpy(padded(rows.target, rows.target_lengths, BOS_ID, None, width, n)),
                 src_tokens=int(rows.source_lengths.sum()) + len(indices),
                 tgt_tokens=int(rows.target_lengths.sum()) + len(indices),
                 keep=torch.from_numpy(keep), targets=torch.from_numpy(tgt_out.reshape(-1)[keep]),
                 sentences=len(indices), source_lengths=_row_lengths(src) if longest_source_first else None)


def _row_lengths(src: np.ndarray) -> np.ndarray:
    """Each row's non-pad positions (right-padded rows)."""
    return np.count_nonzero(src != PAD_ID, axis=1)


@dataclass(frozen=True)
class PackedRows:
    """`train.pack_length`: batches of max_tokens // pack_length rows of pack_length positions, each row several
    whole sentences. `static`: every position goes to the loss (padding with target PAD_ID, which the loss ignores),
    so that keep and targets have one size too: the single static shape torch.compile and CUDA graphs want."""

    pack_length: int
    max_tokens: int
    static: bool = False

    @property
    def rows(self) -> int:
        return rows_per_batch(self.pack_length, self.max_tokens)


def collate_packed(arrays: ParallelArrays | ShardedArrays, plan: PackedPlan, layout: PackedRows) -> Batch:
    """A batch of `packed_batches` packed into (rows, pack_length) on each side: each sentence's tokens and marker
    at its row (as the plan says) and offset, its number in the batch as the segment of those positions and its own
    positions from 0. Array operations throughout."""
    rows = arrays.gather(np.asarray(plan.sentences, dtype=np.int64))
    src_span, tgt_span = rows.source_lengths + 1, rows.target_lengths + 1
    row = np.asarray(plan.rows, dtype=np.int64)
    steps = np.diff(row)
    if len(row) and (row[0] != 0 or row[-1] >= layout.rows or np.any((steps < 0) | (steps > 1))):
        raise ValueError(f"a packed batch's rows must be numbered 0, 1, ... in order, fewer than {layout.rows}")
    row_starts = np.flatnonzero(np.r_[True, steps != 0]) if len(row) else row
    shape = (layout.rows, layout.pack_length)

    def place(span: np.ndarray):
        """Flat positions in `shape` of every sentence's span, and each position's sentence and own position."""
        begin = np.cumsum(span) - span  # where each sentence begins in the running sum
        offset = begin - begin[row_starts][row]  # ... and within its row
        sentence = np.repeat(np.arange(len(span)), span)
        within = ragged_arange(span)
        if np.any(offset + span > layout.pack_length):
            raise ValueError(f"a packed row holds more than {layout.pack_length} positions")
        return np.repeat(row * layout.pack_length + offset, span) + within, sentence, within

    def scatter(flat_positions, values, fill):
        out = np.full(shape, fill, dtype=np.int64)
        out.reshape(-1)[flat_positions] = values
        return torch.from_numpy(out)

    src_at, src_sentence, src_within = place(src_span)
    tgt_at, tgt_sentence, tgt_within = place(tgt_span)
    tgt_out = padded(rows.target, rows.target_lengths, None, EOS_ID)
    tgt_out = tgt_out[tgt_sentence, tgt_within]
    keep = np.arange(shape[0] * shape[1]) if layout.static else tgt_at
    targets = scatter(tgt_at, tgt_out, PAD_ID).reshape(-1)[keep] if layout.static else torch.from_numpy(tgt_out)
    return Batch(
        src=scatter(src_at, padded(rows.source, rows.source_lengths, None, EOS_ID)[src_sentence, src_within], PAD_ID),
        tgt_in=scatter(tgt_at, padded(rows.target, rows.target_lengths, BOS_ID, None)[tgt_sentence, tgt_within],
                       PAD_ID),
        src_tokens=int(src_span.sum()), tgt_tokens=int(tgt_span.sum()),
        keep=torch.from_numpy(keep), targets=targets, sentences=len(row),
        packing=Packing(scatter(src_at, src_sentence, -1), scatter(tgt_at, tgt_sentence, -1),
                        scatter(src_at, src_within, 0), scatter(tgt_at, tgt_within, 0)))


def source_batch(rows: list[list[int]]) -> torch.Tensor:
    """Encoded source sentences → (B, S) ids with EOS, for translation."""
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64)
    return torch.from_numpy(padded(flat, np.array([len(r) for r in rows], dtype=np.int64), None, EOS_ID))
