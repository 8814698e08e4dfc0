"""What a validation during training scores: the dev loss over the valid pairs, and dev BLEU/chrF of the valid
sources translated greedily (or by train.eval_beam_size's beam) against every reference. What its outcome does
(best.pt, patience, a plateau schedule) is the Trainer's."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from nmt.config import Config, DecodeConfig, TrainConfig
from nmt.data.batching import Batch, collate, token_batches
from nmt.data.dataset import ParallelArrays, load_arrays, load_references
from nmt.metrics import corpus_scores
from nmt.translator import Translator

LARGE_VALIDATION = 5_000  # valid sentences past which a CPU run is told how to bound each validation
GPU_VALIDATION_BATCH = 1024  # sentences: see TrainConfig.eval_batch_size


@dataclass(frozen=True)
class DevSet:
    pairs: ParallelArrays  # the dev loss's token shards
    sources: list[str]  # what dev BLEU translates
    references: list[list[str]]  # every target translation of each source


def load_dev_set(prepared: Path, vocabulary: tuple[int, int], cfg: TrainConfig, on_cpu: bool,
                 log: Callable[[str], None]) -> DevSet:
    """The valid split; only the sentences validation translates are read (train.eval_max_sentences: the first N),
    so that a WMT-size valid split need not sit in memory."""
    sources, references = load_references(prepared, "valid", cfg.eval_max_sentences or None)
    if not cfg.eval_max_sentences and len(sources) > LARGE_VALIDATION and on_cpu:
        # A corpus of millions of pairs split by data.valid_fraction: each validation would decode tens of
        # thousands of sentences (a 2M-pair TSV: 23,870, minutes on a CPU).
        log(f"validation decodes all {len(sources):,} valid source sentences every {cfg.eval_every:,} updates: "
            "train.eval_max_sentences N reads the first N only")
    return DevSet(load_arrays(prepared, "valid", vocabulary), sources, references)


def validation_batch_size(cfg: Config, device: torch.device) -> int:
    """Sentences per greedy decoding batch in validation: train.eval_batch_size, or by device when it is 0."""
    if cfg.train.eval_batch_size:
        return cfg.train.eval_batch_size
    return GPU_VALIDATION_BATCH if device.type == "cuda" else cfg.decode.batch_size


def validation_decode(cfg: Config, device: torch.device) -> DecodeConfig:
    """Validation decodes greedily, or by train.eval_beam_size's beam search (dev BLEU picks best.pt): a config that
    samples for back-translation must not make that choice a matter of chance."""
    return dataclasses.replace(cfg.decode, sampling_topk=1, batch_size=validation_batch_size(cfg, device))


@torch.no_grad()
def dev_scores(translator: Translator, dev: DevSet, cfg: TrainConfig,
               token_loss: Callable[[torch.nn.Module, Batch, float], torch.Tensor],
               trim_heap: Callable[[], None]) -> dict:
    """Dev loss (token NLL, no smoothing; `token_loss` is training's, summed over a batch) and dev BLEU/chrF of the
    translator's model, with where the seconds went."""
    model, device = translator.model, translator.device
    model.eval()
    started = time.perf_counter()
    nll, tokens = torch.zeros((), dtype=torch.float64, device=device), 0  # summed on the device
    # train.eval_max_sentences bounds the loss as well as the BLEU: the first N pairs (fairseq's max_valid_steps).
    pairs = cfg.eval_max_sentences or None  # None: the whole split
    for indices in token_batches(dev.pairs.src_lengths[:pairs], dev.pairs.tgt_lengths[:pairs], cfg.max_tokens,
                                 seed=0, epoch=0, shuffle=False):
        batch = collate(dev.pairs, indices, longest_source_first=model.takes_source_lengths).to(device)
        nll += token_loss(model, batch, 0.0)
        tokens += batch.tgt_tokens
        trim_heap()  # each batch is a shape of its own: see nmt.cpu_memory
    nll = float(nll)  # a host read: the loss's seconds end here on a GPU too
    loss_done = time.perf_counter()
    hypotheses = [t.text for t in translator.translate(dev.sources, beam_size=cfg.eval_beam_size)]
    decoded = time.perf_counter()
    scores = corpus_scores(hypotheses, dev.references, target_lang=translator.target_lang)
    # Where a validation's seconds go (on the 2026-11-26 H100 lease, 96 of a 164-s time-to-BLEU run).
    split = {"loss_s": loss_done - started, "decode_s": decoded - loss_done, "score_s": time.perf_counter() - decoded}
    return {"dev_loss": round(nll / tokens, 4), "dev_ppl": round(math.exp(min(nll / tokens, 50)), 2), **scores,
            **{key: round(value, 3) for key, value in split.items()}}
