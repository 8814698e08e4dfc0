"""TrainingFeed: which sentences each rank's updates read, epoch after epoch, without a Trainer."""

import dataclasses

import numpy as np
import pytest

from nmt.config import TrainConfig
from nmt.data.dataset import ParallelArrays
from nmt.data import feed
from nmt.data.feed import TrainingFeed, oversized_pairs_warning
from nmt.errors import NMTError


def _pairs(n: int = 200, seed: int = 0) -> ParallelArrays:
    rng = np.random.default_rng(seed)
    src_len, tgt_len = rng.integers(1, 20, n), rng.integers(1, 20, n)
    return ParallelArrays(rng.integers(4, 30, src_len.sum()), np.r_[0, np.cumsum(src_len)],
                          rng.integers(4, 30, tgt_len.sum()), np.r_[0, np.cumsum(tgt_len)])


def _feed(pairs, rank=0, world_size=1, **train) -> TrainingFeed:
    cfg = dataclasses.replace(TrainConfig(), max_tokens=64, **train)
    return TrainingFeed([pairs], cfg, rank, world_size, static_layout=False, takes_source_lengths=False,
                        pin_memory=False)


def _updates_per_epoch(pairs, world_size=1, **train) -> int:
    """Counted from the plans themselves (an epoch's end stops them at max_epochs 1), not from planned_steps."""
    return len(list(_feed(pairs, 0, world_size, max_epochs=1, **train).update_plans(0, 0, 10 ** 6)))


def _sentences(plan) -> list[int]:
    return [int(i) for micro_batch in plan.micro_batches for i in micro_batch]


def test_ranks_read_disjoint_batches_that_cover_the_epoch_and_agree_on_where_it_stands():
    pairs = _pairs()
    feeds = [_feed(pairs, rank, 2, accum_steps=2) for rank in range(2)]
    updates = _updates_per_epoch(pairs, 2, accum_steps=2)  # a rank's, the same for both
    assert feeds[0].planned_steps() == updates * feeds[0].cfg.max_epochs  # the bar's total counts a rank's share
    plans = [list(feed.update_plans(0, 0, updates)) for feed in feeds]
    seen = [i for rank_plans in plans for plan in rank_plans for i in _sentences(plan)]
    assert len(seen) == len(set(seen))  # no sentence read twice in the epoch, by one rank or by both
    assert len(set(seen)) > 0.9 * len(pairs)  # what is left out is the remainder that makes no whole update
    for ours, theirs in zip(*plans):
        assert len(ours.micro_batches) == 2
        assert (ours.epoch, ours.batch_in_epoch) == (theirs.epoch, theirs.batch_in_epoch)
    assert (plans[0][-1].epoch, plans[0][-1].batch_in_epoch) == (1, 0)  # the epoch's last update moves it on


def test_plans_resume_where_they_stood_and_epochs_shuffle_anew():
    pairs = _pairs()
    feed = _feed(pairs)
    whole = list(feed.update_plans(0, 0, 12))
    resumed = list(feed.update_plans(whole[4].epoch, whole[4].batch_in_epoch, 7))
    assert [_sentences(p) for p in resumed] == [_sentences(p) for p in whole[5:]]
    per_epoch = _updates_per_epoch(pairs)
    first, second = (list(feed.update_plans(epoch, 0, per_epoch)) for epoch in (0, 1))
    assert [_sentences(p) for p in first] != [_sentences(p) for p in second]
    assert {p.planned_in for p in second} == {1}


def test_planned_steps_end_at_max_epochs_and_an_epoch_too_small_for_an_update_is_refused():
    pairs = _pairs()
    per_epoch = _updates_per_epoch(pairs)
    assert _feed(pairs, max_epochs=3).planned_steps() == 3 * per_epoch
    assert _feed(pairs, max_epochs=3, max_steps=5).planned_steps() == 5
    assert len(list(_feed(pairs, max_epochs=2).update_plans(0, 0, 10 ** 6))) == 2 * per_epoch
    with pytest.raises(NMTError, match=r"makes \d+ batch(es)? of train.max_tokens 64 an epoch, fewer than one update"):
        next(_feed(_pairs(n=3), accum_steps=8).update_plans(0, 0, 1))


def test_host_batches_are_the_planned_sentences_collated():
    pairs = _pairs()
    feed = _feed(pairs)
    plan = next(iter(feed.update_plans(0, 0, 1)))
    (batch,) = feed.host_batches(plan.micro_batches)
    indices = plan.micro_batches[0]
    assert batch.sentences == len(indices)
    # Each count holds every sentence's end marker.
    assert batch.src_tokens == int(pairs.src_lengths[indices].sum()) + len(indices)
    assert batch.tgt_tokens == int(pairs.tgt_lengths[indices].sum()) + len(indices)
    for row, i in zip(batch.src.numpy(), indices):
        assert row[:len(pairs.source(i))].tolist() == pairs.source(i).tolist()


def _lengths_pairs(src_lengths, tgt_lengths) -> ParallelArrays:
    src_lengths, tgt_lengths = np.asarray(src_lengths), np.asarray(tgt_lengths)
    return ParallelArrays(np.full(src_lengths.sum(), 5), np.r_[0, np.cumsum(src_lengths)],
                          np.full(tgt_lengths.sum(), 5), np.r_[0, np.cumsum(tgt_lengths)])


@pytest.mark.parametrize("pool", [1 << 20, 3])  # one pool, or pools of 3 pairs (a large corpus's reading)
def test_pairs_over_the_token_budget_are_counted_in_a_warning_that_names_the_budget_needed(pool, monkeypatch):
    monkeypatch.setattr(feed, "POOL_SENTENCES", pool)
    # Costs (longer side + EOS): 6, 10, 31, 12. A budget of 11 leaves two pairs alone in their batches.
    pairs = _lengths_pairs([5, 9, 3, 11], [2, 4, 30, 6])
    said = oversized_pairs_warning(pairs, dataclasses.replace(TrainConfig(), max_tokens=11))
    assert said.startswith("2 training pairs (50.0%) cost more than train.max_tokens 11"), said
    assert "the longest pair 31" in said and "raise it to at least 31" in said
    assert oversized_pairs_warning(pairs, dataclasses.replace(TrainConfig(), max_tokens=31)) is None
    # Rounded widths (train.length_multiple 8) are what a batch pays: 31 → 32, 12 → 16, 10 → 16.
    said = oversized_pairs_warning(pairs, dataclasses.replace(TrainConfig(), max_tokens=31, length_multiple=8))
    assert said.startswith("1 training pair (25.0%)") and "at least 32" in said, said
