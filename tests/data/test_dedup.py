"""The bounded-memory duplicate filter against a plain Python set, across chunks and table growth."""

import numpy as np

from nmt.data.dedup import SeenHashes, hash64


def test_first_seen_matches_a_set_across_chunks_and_growth():
    rng = np.random.default_rng(0)
    seen_hashes, seen = SeenHashes(capacity=16), set()  # starts tiny: grows many times
    for _ in range(40):
        chunk = rng.integers(1, 5000, 3000).astype(np.uint64)  # many repeats, inside and across chunks
        expected = []
        for value in chunk.tolist():
            expected.append(value not in seen)
            seen.add(value)
        assert seen_hashes.first_seen(chunk).tolist() == expected
    assert seen_hashes.count == len(seen)


def test_hash64_is_stable_and_never_zero():
    assert hash64("i'm home.\tJe suis chez moi.") == hash64("i'm home.\tJe suis chez moi.")
    assert hash64("a") != hash64("b") and all(hash64(str(i)) != 0 for i in range(1000))
