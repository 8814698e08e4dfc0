import numpy as np
import pytest
import torch

from nmt.data.batching import collate, source_batch, token_batches
from nmt.data.dataset import ParallelArrays
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from nmt.models.base import select


def lengths(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 40, n), rng.integers(1, 40, n)


def test_every_sentence_once_under_the_token_budget():
    src, tgt = lengths()
    batches = token_batches(src, tgt, max_tokens=300, seed=1, epoch=0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))
    for batch in batches:
        padded = (np.maximum(src[batch], tgt[batch]).max() + 1) * len(batch)
        assert padded <= 300 or len(batch) == 1


def test_deterministic_per_seed_and_epoch_and_shuffled_across_epochs():
    src, tgt = lengths()
    a = token_batches(src, tgt, 300, seed=1, epoch=0)
    assert all(np.array_equal(x, y) for x, y in zip(a, token_batches(src, tgt, 300, seed=1, epoch=0)))
    b = token_batches(src, tgt, 300, seed=1, epoch=1)
    assert not all(len(x) == len(y) and np.array_equal(x, y) for x, y in zip(a, b))


def test_collate_adds_bos_eos_and_pads():
    arrays = ParallelArrays(np.array([5, 6, 7, 8], dtype=np.uint16), np.array([0, 1, 4]),
                            np.array([9, 10, 11], dtype=np.uint16), np.array([0, 2, 3]))
    batch = collate(arrays, np.array([0, 1]))
    assert batch.src.tolist() == [[5, EOS_ID, PAD_ID, PAD_ID], [6, 7, 8, EOS_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 9, 10], [BOS_ID, 11, PAD_ID]]
    # The expected outputs (target ids + EOS) where they are not padding: flat positions in (B, T), ascending.
    tgt_out = torch.full_like(batch.tgt_in, PAD_ID)
    tgt_out.view(-1)[batch.keep] = batch.targets
    assert tgt_out.tolist() == [[9, 10, EOS_ID], [11, EOS_ID, PAD_ID]]
    assert batch.keep.tolist() == [0, 1, 2, 3, 4] and batch.targets.tolist() == [9, 10, EOS_ID, 11, EOS_ID]
    assert (batch.src_tokens, batch.tgt_tokens) == (6, 5)
    hidden = torch.randn(2, 3, 4)
    assert torch.equal(select(hidden, batch.keep), select(hidden, tgt_out.ne(PAD_ID)))
    assert source_batch([[4], [4, 5]]).dtype == torch.int64


def _reference_batches(src_lengths, tgt_lengths, max_tokens, seed, epoch, shuffle=True):
    """The first release's loop over sentences: the vectorized plan must give exactly its batches (exact resume
    of runs started before it)."""
    rng = np.random.default_rng([seed, epoch])
    tie_break = rng.random(len(src_lengths)) if shuffle else np.arange(len(src_lengths))
    order = np.lexsort((tie_break, tgt_lengths, src_lengths))
    cost = np.maximum(src_lengths, tgt_lengths)[order] + 1
    batches, start, longest = [], 0, 0
    for i, c in enumerate(cost.tolist()):
        longest_with = max(longest, c)
        if i > start and longest_with * (i - start + 1) > max_tokens:
            batches.append(order[start:i])
            start, longest_with = i, c
        longest = longest_with
    if start < len(order):
        batches.append(order[start:])
    if shuffle:
        rng.shuffle(batches)
    return batches


def test_vectorized_plan_equals_the_sentence_loop():
    from nmt.data.batching import token_batches

    rng = np.random.default_rng(1)
    for n, max_tokens in ((1000, 400), (20000, 1500), (5000, 4096), (300, 100000), (50, 3)):
        src = rng.integers(1, 60, n).astype(np.uint16)
        tgt = rng.integers(1, 60, n).astype(np.uint16)
        src[::97] = 300  # some sentences longer than a whole batch
        for shuffle in (True, False):
            ours = token_batches(src, tgt, max_tokens, 3, 2, shuffle=shuffle)
            theirs = _reference_batches(src, tgt, max_tokens, 3, 2, shuffle)
            assert len(ours) == len(theirs) and all(np.array_equal(a, b) for a, b in zip(ours, theirs))


def test_epoch_plan_in_pools_covers_each_sentence_once_and_matches_one_piece_plans():
    from nmt.data.batching import EpochPlan, token_batches

    rng = np.random.default_rng(2)
    src, tgt = rng.integers(1, 40, 5000).astype(np.int32), rng.integers(1, 40, 5000).astype(np.int32)
    lengths = lambda start, stop: (src[start:stop], tgt[start:stop])  # noqa: E731
    whole = EpochPlan(lengths, 5000, 500, seed=4, epoch=1)  # one pool: the plan of the whole corpus, unchanged
    reference = token_batches(src, tgt, 500, 4, 1)
    assert len(whole) == len(reference) and all(np.array_equal(whole[i], b) for i, b in enumerate(reference))
    pooled = EpochPlan(lengths, 5000, 500, seed=4, epoch=1, pool=1200)  # five pools, one held at a time
    seen = np.concatenate([pooled[i] for i in range(len(pooled))])
    assert np.array_equal(np.sort(seen), np.arange(5000))
    assert all((np.maximum(src[b], tgt[b]).max() + 1) * len(b) <= 500 for b in (pooled[i] for i in range(len(pooled))))
    again = EpochPlan(lengths, 5000, 500, seed=4, epoch=1, pool=1200)
    assert all(np.array_equal(pooled[i], again[i]) for i in reversed(range(len(again))))  # random access: resume
    other = EpochPlan(lengths, 5000, 500, seed=4, epoch=2, pool=1200)
    assert not all(np.array_equal(pooled[i], other[i]) for i in range(min(len(pooled), len(other))))


def _random_arrays(rng, n, dtype=np.uint16):
    src_len, tgt_len = rng.integers(0, 30, n), rng.integers(0, 30, n)
    return ParallelArrays(rng.integers(4, 1000, src_len.sum()).astype(dtype), np.concatenate([[0], np.cumsum(src_len)]),
                          rng.integers(4, 1000, tgt_len.sum()).astype(dtype), np.concatenate([[0], np.cumsum(tgt_len)]))


def _reference_collate(arrays, indices):
    """The first release's loop over sentences, which the vectorized collate must reproduce exactly."""
    def pad(rows, prefix, suffix):
        out = torch.full((len(rows), max(map(len, rows)) + (prefix is not None) + (suffix is not None)), PAD_ID)
        for i, row in enumerate(rows):
            cells = ([prefix] if prefix is not None else []) + row.tolist() + ([suffix] if suffix is not None else [])
            out[i, :len(cells)] = torch.tensor(cells)
        return out
    sources, targets = [arrays.source(i) for i in indices], [arrays.target(i) for i in indices]
    return pad(sources, None, EOS_ID), pad(targets, BOS_ID, None), pad(targets, None, EOS_ID)


def test_vectorized_collate_equals_the_sentence_loop_on_one_shard_and_several():
    from nmt.data.dataset import ShardedArrays

    rng = np.random.default_rng(7)
    shards = [_random_arrays(rng, n) for n in (40, 1, 25)]
    for arrays in (shards[0], ShardedArrays(shards)):
        for _ in range(20):
            indices = rng.choice(len(arrays), size=rng.integers(1, 30), replace=False)
            batch = collate(arrays, indices)
            src, tgt_in, tgt_out = _reference_collate(arrays, indices)
            assert torch.equal(batch.src, src) and torch.equal(batch.tgt_in, tgt_in)
            assert torch.equal(batch.keep, torch.nonzero(tgt_out.view(-1) != PAD_ID).squeeze(1))
            assert torch.equal(batch.targets, tgt_out.view(-1)[batch.keep])
            assert batch.src_tokens == int(src.ne(PAD_ID).sum()) and batch.tgt_tokens == int(tgt_out.ne(PAD_ID).sum())


def test_static_shape_plan_gives_one_shape_per_width():
    from nmt.data.batching import StaticShapes

    src, tgt = lengths(2000, seed=3)
    batches = token_batches(src, tgt, max_tokens=512, seed=1, epoch=0, length_multiple=8)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))
    static, shapes = StaticShapes(8, 512), set()
    for batch in batches:
        widths = {-(-(max(s, t) + 1) // 8) * 8 for s, t in zip(src[batch], tgt[batch])}
        assert len(widths) == 1  # one padded width per batch
        rows, width = static.shape(src[batch], tgt[batch])
        assert width == widths.pop() and len(batch) <= rows == 512 // width
        shapes.add((rows, width))
    assert len(shapes) == len({-(-(max(s, t) + 1) // 8) * 8 for s, t in zip(src, tgt)}) <= 6  # 1..40 → 5 widths
    assert static.width_count(src, tgt) == len(shapes)  # what train.compile raises dynamo's recompile limit to
    again = token_batches(src, tgt, max_tokens=512, seed=1, epoch=0, length_multiple=8)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


def test_packed_plan_holds_every_sentence_once_in_rows_that_fit():
    from nmt.data.batching import packed_batches

    src, tgt = lengths(2000, seed=4)
    batches = packed_batches(src, tgt, pack_length=64, rows=6, seed=1, epoch=0)
    assert sorted(np.concatenate([b.sentences for b in batches]).tolist()) == list(range(len(src)))
    full_rows = 0
    for batch in batches:
        assert np.all(np.diff(batch.rows) >= 0) and batch.rows[0] == 0  # row by row, numbered from 0
        assert set(batch.rows.tolist()) == set(range(batch.rows[-1] + 1)) and batch.rows[-1] < 6
        full_rows += batch.rows[-1] == 5
        for row in range(batch.rows[-1] + 1):
            at = batch.sentences[batch.rows == row]
            assert (src[at] + 1).sum() <= 64 and (tgt[at] + 1).sum() <= 64
    assert full_rows >= len(batches) - 1  # only the epoch's last batch may be short of rows
    again = packed_batches(src, tgt, pack_length=64, rows=6, seed=1, epoch=0)
    assert all(np.array_equal(a.sentences, b.sentences) and np.array_equal(a.rows, b.rows)
               for a, b in zip(batches, again))
    other = packed_batches(src, tgt, pack_length=64, rows=6, seed=1, epoch=1)
    assert not np.array_equal(np.concatenate([b.sentences for b in batches]),
                              np.concatenate([b.sentences for b in other]))


def test_first_fit_fills_rows_better_than_next_fit():
    """A sentence that does not fit the current row goes to an earlier open row with room, if any. Sentences of 30
    and 40 alternating in rows of 60: next fit closes a row at every sentence (16 rows); first fit pairs the 30s."""
    from nmt.data.batching import first_fit_rows

    span = np.array([30, 40] * 8)
    rows = first_fit_rows(span, span, 60)
    assert rows.max() + 1 == 12  # eight 40s alone, eight 30s in pairs
    for row in range(rows.max() + 1):
        assert span[rows == row].sum() <= 60
    assert first_fit_rows(span, span, 60, open_rows=1).max() + 1 == 16  # one open row is next fit
    assert np.array_equal(first_fit_rows(np.array([70, 5]), np.array([1, 1]), 60), [0, 1])  # too long: alone


def test_a_pooled_packed_plan_holds_every_sentence_once():
    """Packed batches planned a pool at a time keep their corpus indices (each pool's shifted by where it starts)."""
    from nmt.data.batching import EpochPlan

    src, tgt = lengths(5000, seed=9)
    plan = EpochPlan(lambda a, b: (src[a:b], tgt[a:b]), 5000, 512, seed=4, epoch=1, pool=1200, pack_length=64)
    sentences = np.concatenate([plan[i].sentences for i in range(len(plan))])
    assert sorted(sentences.tolist()) == list(range(5000))
    assert max(plan[i].rows.max() for i in range(len(plan))) < 512 // 64


def test_packed_collate_refuses_a_plan_whose_rows_do_not_fit():
    from nmt.data.batching import PackedPlan, PackedRows, collate_packed

    arrays, src_len, tgt_len = _arrays()
    too_full = PackedPlan(np.arange(6), np.zeros(6, dtype=np.int64))  # six sentences (≥ 2 positions each) in 8
    with pytest.raises(ValueError, match="more than 8 positions"):
        collate_packed(arrays, too_full, PackedRows(8, 64))
    for rows in ([1, 0], [0, 2], [1, 1], [0, 4]):  # out of order, a row skipped, not from 0, beyond the batch
        with pytest.raises(ValueError, match="in order"):
            collate_packed(arrays, PackedPlan(np.arange(2), np.array(rows)), PackedRows(16, 64))


def _arrays(n=40, seed=6):
    rng = np.random.default_rng(seed)
    src_len, tgt_len = rng.integers(1, 12, n), rng.integers(1, 12, n)
    return ParallelArrays(rng.integers(4, 30, src_len.sum()), np.r_[0, np.cumsum(src_len)],
                          rng.integers(4, 30, tgt_len.sum()), np.r_[0, np.cumsum(tgt_len)]), src_len, tgt_len


def test_packed_collate_puts_each_sentence_whole_in_its_own_segment():
    """Reading each segment back out of the packed rows gives the tight batch's rows, positions counting from 0."""
    from nmt.data.batching import PackedRows, collate_packed, packed_batches

    arrays, src_len, tgt_len = _arrays()
    plan = packed_batches(src_len, tgt_len, pack_length=32, rows=4, seed=0, epoch=0)[0]
    indices = plan.sentences
    packed, tight = collate_packed(arrays, plan, PackedRows(32, 128)), collate(arrays, indices)
    p = packed.packing
    assert packed.src.shape == packed.tgt_in.shape == (4, 32) and packed.sentences == len(indices)
    assert (packed.src_tokens, packed.tgt_tokens) == (tight.src_tokens, tight.tgt_tokens)
    tgt_out = torch.full((tight.tgt_in.numel(),), PAD_ID)
    tgt_out[tight.keep] = tight.targets
    tgt_out = tgt_out.view(tight.tgt_in.shape)
    packed_out = torch.full((packed.tgt_in.numel(),), PAD_ID)
    packed_out[packed.keep] = packed.targets
    packed_out = packed_out.view(4, 32)
    for j in range(len(indices)):
        for side, segments, positions, tight_rows in ((packed.src, p.src_segments, p.src_positions, tight.src),
                                                      (packed.tgt_in, p.tgt_segments, p.tgt_positions, tight.tgt_in),
                                                      (packed_out, p.tgt_segments, p.tgt_positions, tgt_out)):
            at = segments == j
            assert at.sum(1).count_nonzero() == 1  # one row holds the whole sentence
            span = int(at.sum())
            assert torch.equal(side[at], tight_rows[j, :span]) and torch.equal(positions[at], torch.arange(span))
            assert tight_rows[j, span:].eq(PAD_ID).all()
    assert packed.src[p.src_segments < 0].eq(PAD_ID).all() and packed.tgt_in[p.tgt_segments < 0].eq(PAD_ID).all()
    static = collate_packed(arrays, plan, PackedRows(32, 128, static=True))
    assert torch.equal(static.keep, torch.arange(4 * 32)) and torch.equal(static.targets, packed_out.view(-1))


def test_longest_source_first_reorders_the_rows_and_carries_their_lengths():
    """What a recurrent encoder packs without a host sync: the batch of the same sentences, rows ordered by source
    length (longest first, ties in plan order), and each row's source length (EOS included) on the host."""
    from nmt.data.batching import StaticShapes

    rng = np.random.default_rng(11)
    arrays = _random_arrays(rng, 60)
    for static in (None, StaticShapes(8, 1024)):
        for _ in range(10):
            indices = rng.choice(len(arrays), size=rng.integers(1, 25), replace=False)
            batch = collate(arrays, indices, static, longest_source_first=True)
            by_length = sorted(range(len(indices)), key=lambda k: -len(arrays.source(indices[k])))  # stable
            reordered = collate(arrays, indices[by_length], static)
            for field in ("src", "tgt_in", "keep", "targets"):
                assert torch.equal(getattr(batch, field), getattr(reordered, field)), field
            assert (batch.src_tokens, batch.tgt_tokens) == (reordered.src_tokens, reordered.tgt_tokens)
            empty_rows = len(batch.src) - len(indices)  # a static shape's: a lone EOS each
            expected = [len(arrays.source(indices[k])) + 1 for k in by_length] + [1] * empty_rows
            assert isinstance(batch.source_lengths, np.ndarray) and batch.source_lengths.tolist() == expected
            assert reordered.source_lengths is None
            assert batch.to(torch.device("cpu")).source_lengths is batch.source_lengths
