"""What each update of a training reads: this rank's micro-batches of every epoch's plan, and those batches built on
the host (collated, pinned for a GPU). Reads nothing that training changes, so a thread can run it ahead of the
updates (`nmt.data.prefetch`).

    feed = TrainingFeed(epoch_data, cfg.train, rank, world_size, static_layout=False, ...)
    for plan in feed.update_plans(epoch, batch_in_epoch, updates):
        batches = feed.host_batches(plan.micro_batches, plan.planned_in)
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from nmt.config import Config, TrainConfig
from nmt.data.batching import (POOL_SENTENCES, Batch, EpochPlan, PackedPlan, PackedRows, StaticShapes, collate,
                               collate_packed, pair_costs)
from nmt.data.dataset import ParallelArrays
from nmt.errors import NMTError, counted


@dataclass(frozen=True)
class UpdatePlan:
    micro_batches: list[np.ndarray | PackedPlan]  # this rank's sentences, one plan per micro-batch
    epoch: int  # where training stands once this update is done
    batch_in_epoch: int
    planned_in: int  # the epoch whose plan the micro-batches come from: which draw of the pairs they read


class TrainingFeed:
    """The training pairs of each epoch (`epoch_data`: with data.subword_alpha, epoch e reads the pairs in their drawn
    segmentation e mod the draws) cut into updates for rank `rank` of `world_size`.
    `static_layout`: the model is compiled or its update captured, so batches keep shapes from a small set.
    `takes_source_lengths`: the model packs a recurrent encoder's input."""

    def __init__(self, epoch_data: list[ParallelArrays], cfg: TrainConfig, rank: int, world_size: int, *,
                 static_layout: bool, takes_source_lengths: bool, pin_memory: bool):
        self.epoch_data, self.cfg, self.rank, self.world_size = epoch_data, cfg, rank, world_size
        self.pin_memory = pin_memory
        self.static_shapes = StaticShapes(cfg.length_multiple, cfg.max_tokens) if cfg.length_multiple else None
        # Packed rows are one shape already; compiled or captured, every position also goes to the loss (fixed-size
        # targets). Packed rows trained eagerly (train.pack_length alone) send the real targets only.
        self.packed_rows = PackedRows(cfg.pack_length, cfg.max_tokens, static=static_layout) \
            if cfg.pack_length else None
        if self.packed_rows:
            for data in epoch_data:
                check_pack_length(data, cfg.pack_length)
        # A recurrent encoder packs its input: batches come longest source first with their lengths on the host, so
        # that packing needs no host sync. Not under compile or in a captured update, which run the masked
        # recurrence on static shapes (a host array in a graph would be a graph input, or a recompile per batch; a
        # CUDA graph would keep the captured batch's layout).
        self.sources_longest_first = takes_source_lengths and not static_layout

    def update_plans(self, epoch: int, batch_in_epoch: int, updates: int) -> Iterator[UpdatePlan]:
        """This rank's micro-batches for the next `updates` updates from (epoch, batch_in_epoch), each with where
        training stands after it."""
        cfg = self.cfg
        group = self.world_size * cfg.accum_steps  # batches per update, over all ranks
        while updates > 0 and epoch < cfg.max_epochs:
            data = self.data_of_epoch(epoch)
            batches = EpochPlan(data.lengths, len(data), cfg.max_tokens, cfg.seed, epoch,
                                length_multiple=cfg.length_multiple, pack_length=cfg.pack_length)
            usable = len(batches) // group * group
            if usable == 0:
                raise NMTError(f"the training split ({counted(len(data), 'pair')}) makes {len(batches):,} batch"
                               f"{'' if len(batches) == 1 else 'es'} "
                               f"of train.max_tokens {cfg.max_tokens} an epoch, fewer than one update takes ({group}: "
                               f"train.accum_steps × ranks): lower them, or train on more pairs")
            while batch_in_epoch + group <= usable and updates > 0:
                start = batch_in_epoch + self.rank * cfg.accum_steps
                micro_batches = [batches[i] for i in range(start, min(start + cfg.accum_steps, len(batches)))]
                batch_in_epoch, updates = batch_in_epoch + group, updates - 1
                if batch_in_epoch + group > usable:  # the rest of this epoch cannot make a whole update
                    yield UpdatePlan(micro_batches, epoch + 1, 0, epoch)
                else:
                    yield UpdatePlan(micro_batches, epoch, batch_in_epoch, epoch)
            epoch, batch_in_epoch = epoch + 1, 0

    def data_of_epoch(self, epoch: int) -> ParallelArrays:
        return self.epoch_data[epoch % len(self.epoch_data)]

    def width_count(self) -> int:
        """How many batch widths training makes (static shapes), over every drawn segmentation an epoch may read:
        one draw's lengths in memory at a time."""
        return len(functools.reduce(np.union1d, (self.static_shapes.widths(data.src_lengths, data.tgt_lengths)
                                                 for data in self.epoch_data)))

    def host_batches(self, micro_batches: list[np.ndarray | PackedPlan], epoch: int = 0) -> list[Batch]:
        """One update's micro-batches, planned in `epoch`, collated (and pinned, for a GPU): what the prefetch thread
        builds."""
        data = self.data_of_epoch(epoch)
        batches = [collate_packed(data, indices, self.packed_rows) if self.packed_rows
                   else collate(data, indices, self.static_shapes, self.sources_longest_first)
                   for indices in micro_batches]
        return [b.pin_memory() for b in batches] if self.pin_memory else batches

    def planned_steps(self) -> int:
        """max_steps, or fewer when max_epochs ends training first (so the progress bar's ETA means something)."""
        cfg = self.cfg
        first = self.data_of_epoch(0)  # the draws' lengths are alike (data.subword_alpha): one epoch's batches
        batches = len(EpochPlan(first.lengths, len(first), cfg.max_tokens, cfg.seed, 0,
                                shuffle=False, length_multiple=cfg.length_multiple, pack_length=cfg.pack_length))
        per_epoch = max(1, batches // (self.world_size * cfg.accum_steps))
        return min(cfg.max_steps, per_epoch * cfg.max_epochs)


def eager_layout(cfg: Config) -> Config:
    """`cfg` where train.cuda_graph cannot capture (a CPU, torchrun) and nothing compiles: its static batch layout
    (packed rows, rounded widths) served only the captures, so batches are tight token buckets. On this 2-core CPU
    transformer.yaml's packed rows trained at 0.74x the tokens/s of its token buckets
    (results/packed-vs-buckets-transformer-cpu-bf16.json)."""
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, cuda_graph=False, pack_length=0,
                                                              length_multiple=0))


def oversized_pairs_warning(data: ParallelArrays, cfg: TrainConfig) -> str | None:
    """A warning when some training pairs cost more than train.max_tokens (longer side + 1, rounded up under
    train.length_multiple): each then trains in a batch of its own, over the budget. `max_tokens: 32`, written as a
    sentence count (JoeyNMT's `batch_type: sentence`), trained a few sentences an update with no word of why.
    Packed rows need no warning: a pair longer than a row is refused (`check_pack_length`), a row within the budget.
    Read a pool at a time, as the epoch's plan is: memory stays bounded on a corpus of any size."""
    over = longest = 0
    for start in range(0, len(data), POOL_SENTENCES):
        source, target = data.lengths(start, min(start + POOL_SENTENCES, len(data)))
        cost = pair_costs(source, target, cfg.length_multiple)  # what the epoch's batching charges each pair
        over += int(np.count_nonzero(cost > cfg.max_tokens))
        longest = max(longest, int(cost.max(initial=0)))
    if not over:
        return None
    return (f"{counted(over, 'training pair')} ({over / len(data):.1%}) cost more than train.max_tokens "
            f"{cfg.max_tokens} (the longer side's pieces and its EOS; the longest pair {longest}): each trains in a "
            f"batch of its own. train.max_tokens counts tokens, not sentences; raise it to at least {longest}")


def check_pack_length(data: ParallelArrays, pack_length: int) -> None:
    """Every training sentence must fit a packed row: its longer side and its marker."""
    longest = int(np.maximum(data.src_lengths, data.tgt_lengths).max(initial=0)) + 1
    if longest > pack_length:
        raise NMTError(f"train.pack_length {pack_length} is shorter than the longest training sentence "
                       f"({longest} positions with its marker): raise it to at least {longest}")
