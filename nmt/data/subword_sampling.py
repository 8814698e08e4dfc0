"""Subword regularization (data.subword_alpha): segmentations of the training pairs drawn from the unigram model.

Kudo (2018) trains on a segmentation sampled afresh at every epoch ("▁kitchen" once, "▁kit ch en" another time), so
that the model learns how pieces make words and copes with the one-best segmentation's accidents. His l-best
sampling: segmentation x of a sentence among its `nbest` best is drawn with probability P(x)^alpha / sum over the
l-best of P(x')^alpha, P(x) being the product of its pieces' unigram probabilities.

JoeyNMT and OpenNMT-py draw in the data loader with SentencePiece's own sampler; nmt draws `copies` segmentations
once, in `nmt prepare`, and training's epoch e reads draw e mod copies. Training stays what it was (memory-mapped token
shards, batches planned ahead, nothing tokenized on the critical path), and the draws repeat: SentencePiece's sampler
takes no seed that makes it repeat (a thread-local generator), so nmt takes its deterministic n-best list and draws
with numpy, seeded by the chunk.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import sentencepiece as spm

NBEST_CHUNK = 10_000  # sentences whose n-best lists are held at once (each list: nbest Python lists of ids)


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
                       best: list[list[int]], sampling: SubwordSampling, max_pieces: int,
                       rng: np.random.Generator) -> list[list[list[int]]]:
    """`sampling.copies` drawn segmentations of each text (draw k: the k-th list, one id list per text). A drawn
    segmentation longer than `max_pieces` is replaced by the text's best (`best`), so every draw holds the same
    pairs within the length limit."""
    draws: list[list[list[int]]] = [[] for _ in range(sampling.copies)]
    for start in range(0, len(texts), NBEST_CHUNK):
        stop = min(start + NBEST_CHUNK, len(texts))
        candidates = tokenizer.nbest_encode(texts[start:stop], out_type=int, nbest_size=sampling.nbest)
        chosen = _draw_indices(candidates, log_probabilities, sampling, rng)
        for k in range(sampling.copies):
            draws[k].extend(options[i] if options and len(options[i]) <= max_pieces else best[start + row]
                            for row, (options, i) in enumerate(zip(candidates, chosen[k].tolist())))
    return draws


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
