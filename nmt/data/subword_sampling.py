"""Subword regularization (data.subword_alpha): segmentations of the training pairs drawn from the unigram model.

Kudo (2018) trains on a segmentation sampled afresh at every epoch ("▁kitchen" once, "▁kit ch en" another time), so
that the model learns how pieces make words and copes with the one-best segmentation's accidents. His l-best
sampling: segmentation x of a sentence among its `nbest` best is drawn with probability P(x)^alpha / sum over the
l-best of P(x')^alpha, P(x) being the product of its pieces' unigram probabilities.

JoeyNMT and OpenNMT-py draw in the data loader with SentencePiece's own sampler; nmt draws `copies` segmentations
once, in `nmt prepare`, and training's epoch e reads draw e mod copies. Training stays what it was (memory-mapped token
shards, batches planned ahead, nothing tokenized on the critical path), and the draws repeat: SentencePiece's sampler
takes no seed that makes it repeat (a thread-local generator), so nmt takes its deterministic n-best list and draws
with numpy, each part of the corpus seeded by its place in it (worker processes draw the parts: stream.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import sentencepiece as spm

from nmt.data.tokenizer import Tokenizers

NBEST_CHUNK = 10_000  # sentences whose n-best lists are held at once (each list: nbest Python lists of ids)
DRAW_SEED = 20180829  # of every draw (with the chunk, its part and the side); a new one would change every draw


@dataclass(frozen=True)
class SubwordSampling:
    alpha: float  # the smoothing of the drawing distribution: 0.1 draws widely, 1.0 as the model's probabilities
    nbest: int  # segmentations drawn among: the best `nbest`
    copies: int  # segmentations drawn for each sentence


def piece_log_probabilities(tokenizer: spm.SentencePieceProcessor) -> np.ndarray:
    """Each piece's score in the unigram model: its log-probability (0 for control, unknown and byte pieces, which
    segmentations of one sentence share wherever they occur)."""
    return np.array([tokenizer.get_score(i) for i in range(tokenizer.get_piece_size())], dtype=np.float64)


def draw_segmentations(tokenizer: spm.SentencePieceProcessor, log_probabilities: np.ndarray, texts: list[str],
                       sampling: SubwordSampling, max_pieces: int, rng: np.random.Generator) -> list[list[list[int]]]:
    """`sampling.copies` drawn segmentations of each text (draw k: the k-th list, one id list per text); callers hand
    at most NBEST_CHUNK texts at a time. A drawn segmentation longer than `max_pieces` is replaced by the text's
    best, so every draw holds the same pairs within the length limit (the best one decided which pairs are kept)."""
    candidates = tokenizer.nbest_encode(texts, out_type=int, nbest_size=sampling.nbest)
    chosen = _draw_indices(candidates, log_probabilities, sampling, rng)
    return [[options[i] if options and len(options[i]) <= max_pieces else tokenizer.encode(text, out_type=int)
             for text, options, i in zip(texts, candidates, chosen[k].tolist())]
            for k in range(sampling.copies)]


class Drawer:
    """Draws a chunk of pairs, both sides, as flat id arrays: what `nmt prepare`'s worker processes run."""

    def __init__(self, tokenizers: Tokenizers, sampling: SubwordSampling, max_pieces: int):
        self.sides = [(tokenizer, piece_log_probabilities(tokenizer))
                      for tokenizer in (tokenizers.source, tokenizers.target)]
        self.sampling, self.max_pieces = sampling, max_pieces

    def draw(self, sources: list[str], targets: list[str], seed: list[int]) -> list[DrawnPairs]:
        """`sampling.copies` draws of these pairs; `seed` (with the side) alone decides them."""
        sides = [draw_segmentations(tokenizer, log_probabilities, texts, self.sampling, self.max_pieces,
                                    np.random.default_rng([*seed, side]))
                 for side, ((tokenizer, log_probabilities), texts) in enumerate(zip(self.sides, (sources, targets)))]
        return [DrawnPairs(*_flat(sides[0][k]), *_flat(sides[1][k])) for k in range(self.sampling.copies)]


@dataclass
class DrawnPairs:
    """One draw of some pairs: each side's ids end to end, and each sentence's length."""

    source: np.ndarray
    source_lengths: np.ndarray
    target: np.ndarray
    target_lengths: np.ndarray


def _flat(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    return np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(lengths.sum())), lengths


_worker_drawer: Drawer | None = None  # a worker process's own, made once by `start_worker`


def start_worker(tokenizers: Tokenizers, sampling: SubwordSampling, max_pieces: int) -> None:
    global _worker_drawer
    _worker_drawer = Drawer(tokenizers, sampling, max_pieces)


def draw_in_worker(args: tuple[list[str], list[str], list[int]]) -> list[DrawnPairs]:
    return _worker_drawer.draw(*args)


def _draw_indices(candidates: list[list[list[int]]], log_probabilities: np.ndarray, sampling: SubwordSampling,
                  rng: np.random.Generator) -> np.ndarray:
    """(copies, sentences): which of each sentence's candidates each draw takes, by the Gumbel-max trick (the argmax
    of alpha * log P(x) plus Gumbel noise is a draw from P(x)^alpha / Z), for all sentences and draws at once."""
    counts = np.fromiter(map(len, candidates), dtype=np.int64, count=len(candidates))
    flat = list(itertools.chain.from_iterable(candidates))
    lengths = np.fromiter(map(len, flat), dtype=np.int64, count=len(flat))
    ids = np.fromiter(itertools.chain.from_iterable(flat), dtype=np.int64, count=int(lengths.sum()))
    per_piece = log_probabilities[ids]
    # Each candidate's log P(x): its pieces' sum (a candidate has at least one piece: texts are never empty).
    starts = np.zeros(len(flat), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    scores = np.add.reduceat(per_piece, starts) if len(flat) else np.zeros(0)
    width = max(int(counts.max(initial=0)), 1)
    matrix = np.full((len(candidates), width), -np.inf)
    rows = np.repeat(np.arange(len(candidates)), counts)
    columns = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
    matrix[rows, columns] = sampling.alpha * scores
    noise = rng.gumbel(size=(sampling.copies, len(candidates), width))
    return np.argmax(matrix + noise, axis=-1)
