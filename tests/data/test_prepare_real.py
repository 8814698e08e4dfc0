"""Prepare the real corpus once per session; check the split, the tokenizer and the manifest."""

import json
import math

import numpy as np
import pytest

from nmt.config import DataConfig
from nmt.data.dataset import load_arrays, load_references
from nmt.data.prepare import prepare
from nmt.data.tokenizer import Tokenizers

pytestmark = pytest.mark.slow


def test_no_english_sentence_in_two_splits(prepared):
    sources = {split: set(load_references(prepared, split)[0]) for split in ("valid", "test")}
    manifest = json.loads((prepared / "manifest.json").read_text())
    assert not sources["valid"] & sources["test"]
    tok = Tokenizers.from_dir(prepared)
    train = load_arrays(prepared, "train")
    train_sources = {tok.source.decode(train.source(i).tolist()) for i in range(len(train))}
    assert len(train_sources) == manifest["counts"]["train"]["sources"]
    assert not train_sources & sources["test"] and not train_sources & sources["valid"]


def test_split_sizes_follow_config(prepared):
    manifest = json.loads((prepared / "manifest.json").read_text())
    counts = manifest["counts"]
    total = sum(c["sources"] for c in counts.values())
    for split, fraction in (("valid", 0.017), ("test", 0.017)):
        expected, sigma = total * fraction, math.sqrt(total * fraction * (1 - fraction))
        assert abs(counts[split]["sources"] - expected) < 5 * sigma, (split, counts[split], expected)
    sources, refs = load_references(prepared, "test")
    assert len(sources) == counts["test"]["sources"] and sum(map(len, refs)) == counts["test"]["pairs"]
    assert max(map(len, refs)) > 1, "multi-reference test set expected"
    assert manifest["corpus_sha256"] == DataConfig().corpus_sha256


def test_split_identical_across_runs_and_skip_when_current(prepared, real_data_dir):
    before = {s: load_references(prepared, s) for s in ("valid", "test")}
    mtime = (prepared / "manifest.json").stat().st_mtime_ns
    assert prepare(DataConfig(), real_data_dir, log=lambda *_: None) == prepared
    assert (prepared / "manifest.json").stat().st_mtime_ns == mtime, "prepare should be skipped"
    again = prepare(DataConfig(), real_data_dir, force=True, log=lambda *_: None)
    assert again == prepared
    assert {s: load_references(again, s) for s in ("valid", "test")} == before


def test_changed_setting_prepares_elsewhere(real_data_dir, prepared):
    other = prepare(DataConfig(vocab_size=1000, joint_vocab=False), real_data_dir, log=lambda *_: None)
    assert other != prepared
    tok = Tokenizers.from_dir(other)
    assert not tok.joint and tok.source.get_piece_size() == 1000
    assert load_references(other, "test") == load_references(prepared, "test"), "split must not depend on vocab"


def test_sentencepiece_round_trip_with_byte_fallback(prepared):
    tok = Tokenizers.from_dir(prepared)
    samples = ["Je suis chez moi.", "« Où êtes-vous ? » demanda-t-il.", "Ça coûte 5 € 🙂", "東京は大きい",
               "naïve façade œuvre Ångström"]
    for text in samples:
        ids = tok.target.encode(text)
        assert tok.target.decode(ids) == text
    assert tok.target.get_piece_size() == 8000


def test_encoded_arrays_compact(prepared):
    train = load_arrays(prepared, "train")
    assert train.src_tokens.dtype == np.uint16 and len(train) > 150_000
    assert (train.src_lengths > 0).all() and (train.tgt_lengths > 0).all()
