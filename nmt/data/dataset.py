"""Prepared data as loaded by training, translation and evaluation."""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nmt.errors import NMTError


@dataclass
class ParallelArrays:
    """Encoded pairs: sentence i is tokens[offsets[i]:offsets[i+1]] on each side (no BOS/EOS)."""

    src_tokens: np.ndarray
    src_offsets: np.ndarray
    tgt_tokens: np.ndarray
    tgt_offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> np.ndarray:
        return _lengths(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return _lengths(self.tgt_offsets)

    def lengths(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(source, target) lengths of sentences start..stop-1, read from the (memory-mapped) offsets."""
        return _lengths(self.src_offsets[start:stop + 1]), _lengths(self.tgt_offsets[start:stop + 1])

    def source(self, i: int) -> np.ndarray:
        return self.src_tokens[self.src_offsets[i]:self.src_offsets[i + 1]]

    def target(self, i: int) -> np.ndarray:
        return self.tgt_tokens[self.tgt_offsets[i]:self.tgt_offsets[i + 1]]

    def gather(self, indices: np.ndarray) -> "Rows":
        """Sentences `indices` of both sides, read with one fancy index per side (no loop over sentences)."""
        return Rows(*_gather(self.src_tokens, self.src_offsets, indices),
                    *_gather(self.tgt_tokens, self.tgt_offsets, indices))


@dataclass
class Rows:
    """Some sentences of both sides as flat int64 token arrays (no BOS/EOS) and their lengths, in request order."""

    source: np.ndarray
    source_lengths: np.ndarray
    target: np.ndarray
    target_lengths: np.ndarray

    def take(self, order: np.ndarray) -> "Rows":
        """These rows in `order` (positions into them)."""
        return Rows(*_reorder(self.source, self.source_lengths, order), *_reorder(self.target, self.target_lengths,
                                                                                  order))


def ragged_arange(lengths: np.ndarray) -> np.ndarray:
    """0..n-1 for each n in `lengths`, concatenated: each token's position within its own sentence."""
    starts = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)


def _gather(tokens: np.ndarray, offsets: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    starts = np.asarray(offsets[indices], dtype=np.int64)
    lengths = np.asarray(offsets[indices + 1], dtype=np.int64) - starts
    return np.asarray(tokens[np.repeat(starts, lengths) + ragged_arange(lengths)], dtype=np.int64), lengths


class ShardedArrays:
    """Several `ParallelArrays` shards seen as one (index i lies in the shard whose range holds it)."""

    def __init__(self, shards: list[ParallelArrays]):
        self.shards = shards
        self.starts = np.cumsum([0] + [len(s) for s in shards])

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def src_lengths(self) -> np.ndarray:
        return self.lengths(0, len(self))[0]

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self.lengths(0, len(self))[1]

    def lengths(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        parts = [shard.lengths(max(start - first, 0), min(stop - first, len(shard)))
                 for shard, first in zip(self.shards, self.starts[:-1].tolist())
                 if start < first + len(shard) and stop > first]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _locate(self, i: int) -> tuple[ParallelArrays, int]:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        return self.shards[k], int(i - self.starts[k])

    def source(self, i: int) -> np.ndarray:
        shard, j = self._locate(i)
        return shard.source(j)

    def target(self, i: int) -> np.ndarray:
        shard, j = self._locate(i)
        return shard.target(j)

    def gather(self, indices: np.ndarray) -> Rows:
        """Each shard gathers its own sentences; the rows are then put back in request order."""
        shard_of = np.searchsorted(self.starts, indices, side="right") - 1
        order = np.argsort(shard_of, kind="stable")  # request positions, grouped by shard
        parts = [self.shards[k].gather(indices[order][shard_of[order] == k] - self.starts[k])
                 for k in np.unique(shard_of).tolist()]
        grouped = Rows(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(Rows)))
        return grouped.take(np.argsort(order, kind="stable"))  # request position → its place in the grouped rows


def _reorder(flat: np.ndarray, lengths: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ragged rows (flat tokens + lengths) taken in `order`."""
    starts = (np.cumsum(lengths) - lengths)[order]
    lengths = lengths[order]
    return flat[np.repeat(starts, lengths) + ragged_arange(lengths)], lengths


def _non_decreasing(offsets: np.ndarray, chunk: int = 1 << 20) -> bool:
    """Whether the (memory-mapped) offsets never go back, checked a chunk at a time as `_lengths` reads them."""
    return all(bool((np.diff(offsets[start:start + chunk + 1]) >= 0).all()) for start in range(0, len(offsets), chunk))


def _lengths(offsets: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """Sentence lengths as int32 (4 bytes a sentence, kept for batching), computed a chunk at a time so a 10M-pair
    shard never holds an int64 copy of its offsets."""
    lengths = np.empty(len(offsets) - 1, dtype=np.int32)
    for start in range(0, len(lengths), chunk):
        lengths[start:start + chunk] = np.diff(offsets[start:start + chunk + 1])
    return lengths


def load_arrays(directory: Path, split: str, vocabulary: tuple[int, int] | None = None
                ) -> ParallelArrays | ShardedArrays:
    """A split's token shards, memory-mapped: the corpus is read from disk as batches need it, so training's memory
    does not grow with the corpus (only the offsets, 16 bytes a pair, are read whole). With `vocabulary` (the source
    and target pieces), a shard holding an id past it is refused as damaged, before it indexes an embedding."""
    directory = Path(directory)
    try:
        return _load_shards(directory, _read_manifest(directory)["shards"][split], vocabulary)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise NMTError(f"prepared split {split} in {directory} is missing or damaged ({type(err).__name__}: "
                       f"{err}); run `nmt prepare --force`") from None


def load_drawn_training_arrays(directory: Path, vocabulary: tuple[int, int] | None = None
                               ) -> list[ParallelArrays | ShardedArrays]:
    """The training pairs in each of their drawn segmentations (data.subword_alpha), memory-mapped; none without."""
    directory = Path(directory)
    try:
        return [_load_shards(directory, shards, vocabulary)
                for shards in _read_manifest(directory).get("drawn_train_shards", [])]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise NMTError(f"the drawn segmentations of the training pairs in {directory} are missing or damaged "
                       f"({type(err).__name__}: {err}); run `nmt prepare --force`") from None


def _read_manifest(directory: Path) -> dict:
    return json.loads((directory / "manifest.json").read_text(encoding="utf-8"))


def _load_shards(directory: Path, shards: list[dict], vocabulary: tuple[int, int] | None
                 ) -> ParallelArrays | ShardedArrays:
    arrays = [_load_shard(directory, shard, vocabulary) for shard in shards]
    return arrays[0] if len(arrays) == 1 else ShardedArrays(arrays)


def _load_shard(directory: Path, shard: dict, vocabulary: tuple[int, int] | None) -> ParallelArrays:
    dtype = np.dtype(shard["dtype"])
    if dtype not in (np.uint16, np.int32):
        raise ValueError(f"unexpected token type {dtype}")
    sides = {}
    for side in ("src", "tgt"):
        offsets = np.load(directory / shard[f"{side}_offsets"], allow_pickle=False, mmap_mode="r")
        path = directory / shard[side]
        if offsets.ndim != 1 or len(offsets) != shard["pairs"] + 1 or offsets[-1] * dtype.itemsize != \
                path.stat().st_size:
            raise ValueError(f"{shard[side]} does not match its offsets")
        if offsets[0] != 0 or not _non_decreasing(offsets):  # negative lengths trained on without a word
            raise ValueError(f"the offsets in {shard[side + '_offsets']} go backwards")
        tokens = np.memmap(path, dtype=dtype, mode="r") if offsets[-1] else np.zeros(0, dtype=dtype)
        size = vocabulary[("src", "tgt").index(side)] if vocabulary else None
        if size is not None and len(tokens) and int(tokens.max()) >= size:  # an IndexError deep in training, else
            raise ValueError(f"{shard[side]} holds piece id {int(tokens.max())}, past the vocabulary's {size}")
        sides[side] = (tokens, offsets)
    return ParallelArrays(sides["src"][0], sides["src"][1], sides["tgt"][0], sides["tgt"][1])


def load_references(directory: Path, split: str, limit: int | None = None) -> tuple[list[str], list[list[str]]]:
    """Sources and their reference lists (every target translation of each source sentence); the first `limit`."""
    path = Path(directory) / f"{split}.jsonl"
    if not path.is_file():
        raise NMTError(f"references not found: {path}; run `nmt prepare`")
    sources, references = [], []
    with open(path, encoding="utf-8") as handle:
        for line in itertools.islice(handle, limit):
            row = json.loads(line)
            sources.append(row["source"])
            references.append(row["references"])
    return sources, references
