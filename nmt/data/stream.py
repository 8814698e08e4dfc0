"""The streaming passes of `nmt prepare`: memory stays bounded whatever the corpus size (WMT14 En–Fr: ~36M pairs).

1. `write_split_text`: raw pairs → normalized and filtered in worker processes (chunks, in order, a bounded number in
   flight) → exact duplicates dropped by 64-bit hash (`SeenHashes`) → the hashed split → one text file per split
   and side.
2. (prepare.py) SentencePiece reads the training text files itself, sampling `input_sentence_size` sentences.
3. `encode_split`: text → SentencePiece ids over all cores, chunk by chunk → shards of raw token arrays and their
   offsets (`{split}.{k}.src.bin` ...), which training memory-maps; valid/test also get their references (.jsonl),
   and with data.subword_alpha the training pairs their drawn segmentations (`train.draw{d}.{k}...`).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from nmt.config import DataConfig
from nmt.data.corpus import normalize_pair
from nmt.data.dedup import SeenHashes, hash64
from nmt.data.normalizer import Normalizer
from nmt.data.split import SPLITS, capped_sources, group_references, split_of
from nmt.data.subword_sampling import (DRAW_SEED, NBEST_CHUNK, Drawer, DrawnPairs, SubwordSampling, draw_in_worker,
                                       start_worker)
from nmt.data.tokenizer import UNK_ID, Tokenizers

CHUNK_PAIRS = 20_000  # per worker task: large enough to amortize pickling, small enough to stay bounded
SHARD_PAIRS = 4_000_000  # pairs per token shard


def _normalize_chunk(args) -> tuple[list[tuple[str, str]], list[int], list[str], dict[str, int]]:
    """A worker's task: normalized pairs that pass the filters, their pair hashes, their splits, drop counts."""
    pairs, normalizer, max_words, salt, valid_fraction, test_fraction = args
    kept, hashes, splits, dropped = [], [], [], {"empty": 0, "too_long": 0}
    for raw_source, raw_target in pairs:
        (source, target), reason = normalize_pair(raw_source, raw_target, normalizer, max_words)
        if reason:
            dropped[reason] += 1
        else:
            kept.append((source, target))
            hashes.append(hash64(f"{source}\t{target}"))  # tabs never survive normalization: unambiguous
            splits.append(split_of(source, salt, valid_fraction, test_fraction))
    return kept, hashes, splits, dropped


def in_chunks(items: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of `size` items (the last one shorter), read lazily from an unbounded stream."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _normalized_chunks(pairs: Iterable, normalizer: Normalizer, cfg: DataConfig, workers: int) -> Iterator[tuple]:
    """`_normalize_chunk` over the corpus, in order; in `workers` processes with at most 2 tasks each in flight (the
    reader waits for them rather than queueing the whole corpus in memory)."""
    settings = (normalizer, cfg.max_words, cfg.split_salt, cfg.valid_fraction, cfg.test_fraction)
    chunks = in_chunks(pairs, CHUNK_PAIRS)
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is None or workers < 2:  # a small corpus: no processes to start
        for chunk in itertools.chain([first], [second] if second else [], chunks):
            yield _normalize_chunk((chunk, *settings))
        return
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        in_flight: deque = deque()
        for chunk in itertools.chain([first, second], chunks):
            in_flight.append(pool.apply_async(_normalize_chunk, ((chunk, *settings),)))
            if len(in_flight) >= 2 * workers:
                yield in_flight.popleft().get()
        while in_flight:
            yield in_flight.popleft().get()


def write_split_text(pairs: Iterable[tuple[str, str]], normalizer: Normalizer, cfg: DataConfig,
                     heldout: dict[str, list[tuple[str, str]]], out: Path, workers: int):
    """Pass 1. Returns ({split: (source text, target text)}, drop counts, {split: pairs}).

    `heldout`: the user's own valid/test pairs (already normalized); they replace those hashed splits, whose pairs
    go to training, and training pairs whose source is held out are dropped.
    """
    text = {name: (out / f"{name}.src.txt", out / f"{name}.tgt.txt") for name in SPLITS}
    handles = {name: tuple(open(p, "w", encoding="utf-8") for p in paths) for name, paths in text.items()}
    dropped = {"empty": 0, "too_long": 0, "duplicate": 0}
    counts = dict.fromkeys(SPLITS, 0)
    heldout_sources = {hash64(source) for pairs_ in heldout.values() for source, _ in pairs_}
    if heldout:
        dropped["source_in_heldout"] = 0
    seen = SeenHashes()
    try:
        for name, held in heldout.items():
            for source, target in held:
                _write(handles[name], source, target)
            counts[name] = len(held)
        for kept, hashes, splits, chunk_dropped in _normalized_chunks(pairs, normalizer, cfg, workers):
            for key, value in chunk_dropped.items():
                dropped[key] += value
            new = seen.first_seen(np.array(hashes, dtype=np.uint64))
            dropped["duplicate"] += int(len(new) - new.sum())
            for (source, target), split, is_new in zip(kept, splits, new.tolist()):
                if not is_new:
                    continue
                if heldout:
                    if hash64(source) in heldout_sources:
                        dropped["source_in_heldout"] += 1
                        continue
                    split = "train" if split in heldout else split
                _write(handles[split], source, target)
                counts[split] += 1
    finally:
        for pair in handles.values():
            for handle in pair:
                handle.close()
    return text, dropped, counts


def cap_heldout(text: dict[str, tuple[Path, Path]], counts: dict[str, int], cap: int, salt: str,
                own: Iterable[str]) -> dict[str, tuple[int, int, int]]:
    """Keep at most `cap` distinct sources in each hashed held-out split (not in the user's own, `own`, scored
    whole): the rest, every pair of a source together, join the training text, so the split stays leakage-free.
    A corpus of millions of pairs held out 1.7% of its sources each for valid and test: tens of thousands of
    sentences for every validation and evaluation. Returns {split: (sources before, sources moved, pairs moved)}
    for the splits it cut, and updates `counts`."""
    moved, own = {}, set(own)
    for name in (name for name in SPLITS if name != "train" and name not in own):
        sources, targets = (path.read_text(encoding="utf-8").splitlines() for path in text[name])
        distinct = len(set(sources))
        if distinct <= cap:
            continue
        kept = capped_sources(sources, salt, cap)
        stays = [source in kept for source in sources]
        for path, lines in zip(text[name], (sources, targets)):
            path.write_text("".join(line + "\n" for line, held in zip(lines, stays) if held), encoding="utf-8")
        with open(text["train"][0], "a", encoding="utf-8") as train_sources, \
                open(text["train"][1], "a", encoding="utf-8") as train_targets:
            for source, target, held in zip(sources, targets, stays):
                if not held:
                    _write((train_sources, train_targets), source, target)
        pairs = stays.count(False)
        counts[name] -= pairs
        counts["train"] += pairs
        moved[name] = (distinct, distinct - cap, pairs)
    return moved


def _write(handles, source: str, target: str) -> None:
    handles[0].write(source + "\n")
    handles[1].write(target + "\n")


def _text_chunks(paths: tuple[Path, Path], size: int) -> Iterator[tuple[list[str], list[str]]]:
    with open(paths[0], encoding="utf-8") as sources, open(paths[1], encoding="utf-8") as targets:
        while True:
            source = [line.rstrip("\n") for line in itertools.islice(sources, size)]
            target = [line.rstrip("\n") for line in itertools.islice(targets, size)]
            if not source:
                return
            yield source, target


class _ShardWriter:
    """Appends encoded pairs to raw token files; a new shard every SHARD_PAIRS pairs."""

    def __init__(self, out: Path, split: str, dtype: np.dtype):
        self.out, self.split, self.dtype = out, split, dtype
        self.shards: list[dict] = []
        self._open()

    def _open(self) -> None:
        stem = f"{self.split}.{len(self.shards):03d}"
        self.current = {"pairs": 0, "src": f"{stem}.src.bin", "tgt": f"{stem}.tgt.bin",
                        "src_offsets": f"{stem}.src.offsets.npy", "tgt_offsets": f"{stem}.tgt.offsets.npy",
                        "dtype": np.dtype(self.dtype).name}
        self.files = {side: open(self.out / self.current[side], "wb") for side in ("src", "tgt")}
        self.lengths = {"src": [], "tgt": []}

    def add(self, source_ids: list[list[int]], target_ids: list[list[int]]) -> None:
        for side, rows in (("src", source_ids), ("tgt", target_ids)):
            if rows:
                flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=self.dtype)
                self.files[side].write(flat.tobytes())
                self.lengths[side].append(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)))
        self._added(len(source_ids))

    def add_flat(self, pairs: DrawnPairs) -> None:
        """Pairs whose ids come end to end, with their lengths (a worker's draw)."""
        for side, flat, lengths in (("src", pairs.source, pairs.source_lengths),
                                    ("tgt", pairs.target, pairs.target_lengths)):
            self.files[side].write(flat.astype(self.dtype).tobytes())
            self.lengths[side].append(lengths)
        self._added(len(pairs.source_lengths))

    def _added(self, pairs: int) -> None:
        self.current["pairs"] += pairs
        if self.current["pairs"] >= SHARD_PAIRS:
            self._close()
            self._open()

    def _close(self) -> None:
        for side in ("src", "tgt"):
            self.files[side].close()
            lengths = np.concatenate(self.lengths[side]) if self.lengths[side] else np.zeros(0, dtype=np.int64)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            np.save(self.out / self.current[f"{side}_offsets"], offsets)
        self.shards.append(self.current)

    def finish(self) -> list[dict]:
        self._close()
        if len(self.shards) > 1 and self.shards[-1]["pairs"] == 0:  # an empty last shard (count was a multiple)
            for key in ("src", "tgt", "src_offsets", "tgt_offsets"):
                (self.out / self.shards[-1][key]).unlink()
            self.shards.pop()
        return self.shards


@dataclass
class EncodedSplit:
    """What pass 3 made of one split."""

    kept: int  # pairs
    sources: int  # distinct source sentences kept
    shards: list[dict]
    unlike: int  # pairs dropped for their length ratio
    pieces: tuple[int, int]  # of the pairs in the shards: the source's and the target's
    unknown: tuple[int, int]  # of those, <unk>: words outside a word vocabulary, characters without byte fallback
    # With subword sampling (training only): each draw's shards, the same pairs in the same order, and its pieces.
    drawn_shards: list[list[dict]] = field(default_factory=list)
    drawn_pieces: list[tuple[int, int]] = field(default_factory=list)


def encode_split(text: tuple[Path, Path], tokenizers: Tokenizers, max_pieces: int, out: Path, split: str,
                 workers: int, score_every_pair: bool = False, max_length_ratio: float = 0.0,
                 sampling: SubwordSampling | None = None) -> EncodedSplit:
    """Pass 3 for one split. Pairs with more than `max_pieces` pieces on a side are dropped (positions and memory
    are bounded); with `score_every_pair` (a held-out file of one's own) only from the token shards (the dev loss),
    while the references keep every pair. With `max_length_ratio`, so are pairs whose longer side has more than
    that many times the pieces of the shorter (`length_ratio_ok`). With `sampling`, the kept pairs are also written
    in `sampling.copies` drawn segmentations (`{split}.draw{k}.…` shards; the best one decides what is kept)."""
    vocab = max(tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size())
    dtype = np.uint16 if vocab <= 65536 else np.int32
    writer = _ShardWriter(out, split, dtype)
    drawn = _DrawnSegmentations(tokenizers, sampling, max_pieces, out, split, dtype, workers) if sampling else None
    sources_seen, distinct, kept, unlike = SeenHashes(), 0, 0, 0
    pieces, unknown = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)
    references = open(out / f"{split}.jsonl.pairs", "w", encoding="utf-8") if split != "train" else None
    try:
        for chunk, (source_text, target_text) in enumerate(_text_chunks(text, 100_000)):
            source_ids = tokenizers.source.encode(source_text, out_type=int, num_threads=workers)
            target_ids = tokenizers.target.encode(target_text, out_type=int, num_threads=workers)
            keep = [i for i in range(len(source_ids))
                    if len(source_ids[i]) <= max_pieces and len(target_ids[i]) <= max_pieces]
            if max_length_ratio:
                alike = [i for i in keep if length_ratio_ok(len(source_ids[i]), len(target_ids[i]), max_length_ratio)]
                keep, unlike = alike, unlike + len(keep) - len(alike)
            sides = [source_ids[i] for i in keep], [target_ids[i] for i in keep]
            writer.add(*sides)
            if drawn:
                drawn.add(chunk, [source_text[i] for i in keep], [target_text[i] for i in keep])
            pieces += [sum(map(len, side)) for side in sides]
            unknown += [sum(ids.count(UNK_ID) for ids in side) for side in sides]
            scored = range(len(source_ids)) if score_every_pair else keep
            kept += len(scored)
            new = sources_seen.first_seen(np.array([hash64(source_text[i]) for i in scored], dtype=np.uint64))
            distinct += int(new.sum())
            if references is not None:
                for i in scored:
                    references.write(json.dumps([source_text[i], target_text[i]], ensure_ascii=False) + "\n")
    finally:
        shards = writer.finish()
        drawn_shards = drawn.finish() if drawn else []
        if references is not None:
            references.close()
    if references is not None:
        _write_references(out / f"{split}.jsonl.pairs", out / f"{split}.jsonl")
    return EncodedSplit(kept, distinct, shards, unlike, tuple(map(int, pieces)), tuple(map(int, unknown)),
                        drawn_shards, drawn.pieces() if drawn else [])


class _DrawnSegmentations:
    """The shards of `sampling.copies` drawn segmentations of a split's kept pairs. Each chunk is drawn in parts of
    NBEST_CHUNK pairs, in `workers` processes (SentencePiece's n-best has no thread pool), at most two parts each in
    flight, written in order; a part's seed is its place in the split, so any number of workers writes the same ids."""

    def __init__(self, tokenizers: Tokenizers, sampling: SubwordSampling, max_pieces: int, out: Path, split: str,
                 dtype: np.dtype, workers: int):
        self.writers = [_ShardWriter(out, f"{split}.draw{k}", dtype) for k in range(sampling.copies)]
        self.counts = np.zeros((sampling.copies, 2), dtype=np.int64)
        self.pool = multiprocessing.get_context("spawn").Pool(
            workers, initializer=start_worker, initargs=(tokenizers, sampling, max_pieces)) if workers > 1 else None
        self.drawer = None if self.pool else Drawer(tokenizers, sampling, max_pieces)
        self.workers, self.in_flight = workers, deque()

    def add(self, chunk: int, sources: list[str], targets: list[str]) -> None:
        for part, start in enumerate(range(0, len(sources), NBEST_CHUNK)):
            task = (sources[start:start + NBEST_CHUNK], targets[start:start + NBEST_CHUNK], [DRAW_SEED, chunk, part])
            if self.pool is None:
                self._write(self.drawer.draw(*task))
                continue
            self.in_flight.append(self.pool.apply_async(draw_in_worker, (task,)))
            if len(self.in_flight) >= 2 * self.workers:
                self._write(self.in_flight.popleft().get())

    def _write(self, draws: list[DrawnPairs]) -> None:
        for k, (writer, pairs) in enumerate(zip(self.writers, draws)):
            writer.add_flat(pairs)
            self.counts[k] += [len(pairs.source), len(pairs.target)]

    def finish(self) -> list[list[dict]]:
        try:
            while self.in_flight:
                self._write(self.in_flight.popleft().get())
        finally:
            if self.pool is not None:
                self.pool.terminate()  # done, or stopped by an error: nothing of theirs is wanted
        return [writer.finish() for writer in self.writers]

    def pieces(self) -> list[tuple[int, int]]:
        return [tuple(map(int, row)) for row in self.counts]


def length_ratio_ok(source_pieces: int, target_pieces: int, max_ratio: float) -> bool:
    """Whether a pair's sides are alike in length: the longer at most `max_ratio` times the shorter, in pieces."""
    return max(source_pieces, target_pieces) <= max_ratio * min(source_pieces, target_pieces)


def _write_references(pairs_path: Path, path: Path) -> None:
    """valid/test (small by construction): every translation of a source gathered, in first-seen order."""
    with open(pairs_path, encoding="utf-8") as handle:
        pairs = [tuple(json.loads(line)) for line in handle]
    with open(path, "w", encoding="utf-8") as handle:
        for source, refs in group_references(pairs):
            handle.write(json.dumps({"source": source, "references": refs}, ensure_ascii=False) + "\n")
    pairs_path.unlink()
