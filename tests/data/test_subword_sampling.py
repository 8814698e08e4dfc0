"""Subword regularization (data.subword_alpha): the training pairs drawn in other segmentations in `nmt prepare`,
reproducibly, and read one draw per epoch by training."""

import filecmp
import json

import numpy as np
import pytest
import torch

from nmt.config import DataConfig, load_config
from nmt.data.batching import collate
from nmt.data.dataset import load_arrays, load_drawn_training_arrays
from nmt.data.prepare import prepare
from nmt.data.stream import encode_split
from nmt.data.subword_sampling import SubwordSampling, _draw_indices, draw_segmentations, piece_log_probabilities
from nmt.data.tokenizer import Tokenizers
from nmt.errors import ConfigError
from nmt.run_dir import Run
from nmt.train import Trainer, train
from tests_helpers import TOY_DATA, TOY_RUN, nmt, toy_parallel_corpus, write_config

SAMPLED = {"subword_alpha": 0.1, "subword_samples": 3}


def _corpus(tmp_path) -> dict:
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text(toy_parallel_corpus(), encoding="utf-8")
    return dict(TOY_DATA, corpus=str(corpus), source_lang="en", target_lang="fr")


def test_every_draw_holds_the_same_pairs_cut_otherwise(tmp_path):
    said = []
    directory = prepare(DataConfig(**_corpus(tmp_path), **SAMPLED), tmp_path / "d", log=said.append)
    tokenizers = Tokenizers.from_dir(directory)
    best, draws = load_arrays(directory, "train"), load_drawn_training_arrays(directory)
    assert len(draws) == 3 and all(len(draw) == len(best) for draw in draws)
    cut_otherwise = 0
    for i in range(len(best)):
        for draw in draws:  # another cut of the same text, on both sides
            for tokenizer, side in ((tokenizers.source, "source"), (tokenizers.target, "target")):
                drawn, first = getattr(draw, side)(i), getattr(best, side)(i)
                assert tokenizer.decode(drawn.tolist()) == tokenizer.decode(first.tolist())
            cut_otherwise += draw.source(i).tolist() != best.source(i).tolist()
    assert cut_otherwise > len(best)  # of 3 draws per pair, over a third differ from the best
    summary = next(line for line in said if "drawn segmentations" in line)
    assert summary.startswith("train: 3 drawn segmentations (data.subword_alpha 0.1 among the 16 best), +")
    # Valid and test keep the best segmentation: nothing drawn for them.
    manifest = json.loads((directory / "manifest.json").read_text())
    assert len(manifest["drawn_train_shards"]) == 3 and manifest["settings"]["subword_alpha"] == 0.1


def test_the_same_settings_draw_the_same_ids(tmp_path, monkeypatch):
    """SentencePiece's own sampler repeats under no seed; nmt's draws do, so prepared data is a function of its
    settings and text, whatever the number of processes that drew it (one: in the main process)."""
    prepared = prepare(DataConfig(**_corpus(tmp_path), **SAMPLED), tmp_path / "a", log=lambda *_: None)
    again = prepare(DataConfig(**_corpus(tmp_path), **SAMPLED), tmp_path / "b", log=lambda *_: None)
    drawn = json.loads((prepared / "manifest.json").read_text())["drawn_train_shards"]
    files = [shard[key] for shards in drawn for shard in shards for key in ("src", "tgt")]
    assert filecmp.cmpfiles(prepared, again, files, shallow=False)[0] == files
    assert (prepared / files[0]).read_bytes() != (prepared / files[2]).read_bytes()  # the draws differ
    # The training split drawn again by 1 and by 3 processes, in parts of 50 pairs, from the same model.
    monkeypatch.setattr("nmt.data.stream.NBEST_CHUNK", 50)
    text = tmp_path / "train.src.txt", tmp_path / "train.tgt.txt"
    best = load_arrays(prepared, "train")
    tokenizers = Tokenizers.from_dir(prepared)
    for path, tokenizer, row in ((text[0], tokenizers.source, best.source), (text[1], tokenizers.target, best.target)):
        path.write_text("".join(tokenizer.decode(row(i).tolist()) + "\n" for i in range(len(best))),
                        encoding="utf-8")
    sampling = SubwordSampling(SAMPLED["subword_alpha"], 16, SAMPLED["subword_samples"])
    for workers in (1, 3):
        (tmp_path / f"workers-{workers}").mkdir()
        encode_split(text, tokenizers, 256, tmp_path / f"workers-{workers}", "train", workers, sampling=sampling)
    assert filecmp.cmpfiles(tmp_path / "workers-1", tmp_path / "workers-3", files, shallow=False)[0] == files


def test_draws_follow_the_smoothed_model_probabilities():
    """Candidate x of a sentence is drawn with probability P(x)^alpha / Z (Kudo's l-best sampling)."""
    log_probabilities = np.log(np.array([0.5, 0.3, 0.2]))
    candidates = [[[0], [1], [2]]] * 20_000  # one piece each: log P(x) is that piece's
    for alpha, expected in ((1.0, [0.5, 0.3, 0.2]), (0.0, [1 / 3] * 3)):
        chosen = _draw_indices(candidates, log_probabilities, SubwordSampling(alpha, 3, 2), np.random.default_rng(0))
        assert chosen.shape == (2, 20_000)
        assert np.bincount(chosen.ravel(), minlength=3) / chosen.size == pytest.approx(expected, abs=0.01)
    # A sentence with fewer candidates than the others never draws one it does not have.
    ragged = [[[0], [1], [2]], [[0]]] * 1000
    chosen = _draw_indices(ragged, log_probabilities, SubwordSampling(0.0, 3, 4), np.random.default_rng(0))
    assert not chosen[:, 1::2].any()


def test_a_drawn_side_longer_than_max_pieces_keeps_the_best(tmp_path):
    directory = prepare(DataConfig(**_corpus(tmp_path)), tmp_path / "d", log=lambda *_: None)
    tokenizer = Tokenizers.from_dir(directory).source
    text = "They have five apples."
    best = tokenizer.encode([text], out_type=int)
    sampling = SubwordSampling(alpha=0.0, nbest=16, copies=8)  # alpha 0: every candidate alike, most longer
    log_probabilities = piece_log_probabilities(tokenizer)
    free = draw_segmentations(tokenizer, log_probabilities, [text], sampling, 1000, np.random.default_rng(1))
    assert any(len(draw[0]) > len(best[0]) for draw in free)
    bounded = draw_segmentations(tokenizer, log_probabilities, [text], sampling, len(best[0]),
                                 np.random.default_rng(1))
    assert all(len(draw[0]) <= len(best[0]) for draw in bounded)
    assert all(tokenizer.decode(draw[0]) == text for draw in free + bounded)


def test_epoch_e_trains_on_draw_e_mod_the_draws(tmp_path):
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, data={**_corpus(tmp_path), **SAMPLED}))
    trainer = Trainer(cfg, Run(tmp_path / "run"), tmp_path / "data", log=lambda *_: None)
    assert len(trainer.feed.epoch_data) == 3
    plans = list(trainer.feed.update_plans(epoch=0, batch_in_epoch=0, updates=10_000))  # until max_epochs ends them
    epochs = sorted({plan.planned_in for plan in plans})
    assert len(epochs) >= 4  # past the third draw: the first comes again
    read_another = False
    for epoch in epochs:
        plan = next(plan for plan in plans if plan.planned_in == epoch)
        (batch,) = trainer.feed.host_batches(plan.micro_batches, plan.planned_in)
        own, other = (collate(trainer.feed.epoch_data[e % 3], plan.micro_batches[0]) for e in (epoch, epoch + 1))
        assert torch.equal(batch.src, own.src) and torch.equal(batch.tgt_in, own.tgt_in)
        read_another |= batch.src.shape != other.src.shape or not torch.equal(batch.src, other.src)
    assert read_another  # the same sentences in another draw would have been other batches
    # The batch plan of each epoch is made on its draw's lengths.
    lengths = [trainer.feed.data_of_epoch(e).src_lengths for e in range(3)]
    assert not np.array_equal(lengths[0], lengths[1])


def test_what_subword_sampling_cannot_do_is_said(tmp_path):
    for level, why in (("bpe", r"SentencePiece's BPE-dropout draws from a generator that no seed makes repeat"),
                       ("char", "a char vocabulary has one way to cut a sentence")):
        with pytest.raises(ConfigError, match=rf"data.subword_alpha draws among the segmentations of a unigram "
                                              rf"model: {why}.* \(data.tokenizer_type unigram, or data.subword_alpha: "
                                              rf"0\)"):
            load_config(write_config(tmp_path, base=TOY_RUN, data={"tokenizer_type": level, "subword_alpha": 0.1}))


def test_a_run_on_drawn_segmentations_resumes_exactly(tmp_path):
    """Stopped in its second epoch (the second draw) and resumed, training goes on with the draws an uninterrupted
    run reads (~18 updates an epoch on this toy: 45 span three epochs, three draws)."""
    data = {**_corpus(tmp_path), **SAMPLED}
    settings = {"precision": "fp32", "save_every": 12, "eval_every": 100}
    straight = load_config(write_config(tmp_path, "straight", base=TOY_RUN, data=data,
                                        train={**settings, "max_steps": 45}))
    said = []
    train(straight, tmp_path / "straight", tmp_path / "data", log=said.append)
    assert "subword regularization: the training pairs in 3 drawn segmentations (data.subword_alpha 0.1), epoch e " \
           "on draw e mod 3" in said
    half = load_config(write_config(tmp_path, "half", base=TOY_RUN, data=data, train={**settings, "max_steps": 24}))
    train(half, tmp_path / "resumed", tmp_path / "data", log=lambda *_: None)
    train(straight, tmp_path / "resumed", tmp_path / "data", log=lambda *_: None)
    a, b = (Run(tmp_path / name).load(Run(tmp_path / name).checkpoint_path("last"))["model"]
            for name in ("straight", "resumed"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    records = [json.loads(line) for line in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    assert max(record.get("epoch", 0) for record in records) >= 2  # past the first draw, and the second


def test_a_borrowed_tokenizer_that_cannot_draw_is_refused(tmp_path):
    """data.tokenizer_from takes the other run's tokenizer type, which the config's own check never saw."""
    data = _corpus(tmp_path)
    bpe_run = tmp_path / "bpe"
    config = write_config(tmp_path, base=TOY_RUN, data={**data, "tokenizer_type": "bpe"}, train={"max_steps": 1})
    trained = nmt("train", "--config", config, "--run-dir", bpe_run, "--data-dir", tmp_path / "data")
    assert trained.returncode == 0, trained.stderr
    borrowing = write_config(tmp_path, "borrowing", base=TOY_RUN, data={**data, "tokenizer_from": str(bpe_run),
                                                                         "subword_alpha": 0.1})
    refused = nmt("train", "--config", borrowing, "--run-dir", tmp_path / "run", "--data-dir", tmp_path / "data")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"the tokenizer of {bpe_run} is data.tokenizer_type bpe: data.subword_alpha draws among the " \
           "segmentations of a unigram model: SentencePiece's BPE-dropout" in refused.stderr


def test_static_shapes_count_the_widths_of_every_draw(tmp_path):
    """train.compile's recompile limit and train.cuda_graph's graph count take the batch widths an epoch may make:
    a draw's longer sentences make widths the best segmentation does not."""
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, data={**_corpus(tmp_path), **SAMPLED},
                                   train={"length_multiple": 2}))
    trainer = Trainer(cfg, Run(tmp_path / "run"), tmp_path / "data", log=lambda *_: None)
    static = trainer.feed.static_shapes
    best = set(static.widths(trainer.train_data.src_lengths, trainer.train_data.tgt_lengths).tolist())
    drawn = set().union(*(static.widths(d.src_lengths, d.tgt_lengths).tolist() for d in trainer.feed.epoch_data))
    assert drawn - best  # widths only the draws make
    assert trainer.feed.width_count() == len(drawn)
