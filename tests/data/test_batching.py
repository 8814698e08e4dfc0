import numpy as np
import torch

from nmt.data.batching import collate, source_batch, token_batches
from nmt.data.dataset import ParallelArrays
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID


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
    assert batch.tgt_out.tolist() == [[9, 10, EOS_ID], [11, EOS_ID, PAD_ID]]
    assert (batch.src_tokens, batch.tgt_tokens) == (6, 5)
    assert source_batch([[4], [4, 5]]).dtype == torch.int64
