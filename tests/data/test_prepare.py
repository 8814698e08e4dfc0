"""Prepare on small corpora made here: refusals, filtering by subword pieces, stale staging."""

import json

import pytest

from conftest import make_zip, toy_corpus_text
from nmt.config import DataConfig, fingerprint_settings
from nmt.data.dataset import load_arrays, load_references
from nmt.data.download import download_corpus
from nmt.data.prepare import prepare, prepared_normalizer, read_manifest, run_data_for_resume, vocabulary_summary
from nmt.data.split import capped_sources
from nmt.data.tokenizer import Tokenizers
from nmt.errors import NMTError
from tests_helpers import TOY_DATA, toy_parallel_corpus


def corpus_dir(tmp_path, text: str):
    (tmp_path / "c.zip").write_bytes(make_zip({"fra-eng/fra.txt": text}))
    data = tmp_path / "data"
    download_corpus(str(tmp_path / "c.zip"), data, None, progress=False)
    return data


def test_a_corpus_too_small_for_the_splits_is_refused_at_prepare(tmp_path):
    data = corpus_dir(tmp_path, toy_corpus_text())  # 7 pairs: valid and test would be empty
    with pytest.raises(NMTError, match=r"the (valid|test)( and test)? split would be empty \(7 usable pairs\)"):
        prepare(DataConfig(**{**TOY_DATA, "valid_fraction": 0.017, "test_fraction": 0.017}), data,
                log=lambda *_: None)
    assert not list((data / "prepared").glob("*")), "nothing half-prepared is left"


@pytest.mark.parametrize("setting,named", [({"max_pieces": 4}, "data.max_pieces 4"),
                                            ({"max_pieces": 5, "max_length_ratio": 3.0},
                                             "data.max_pieces 5 and data.max_length_ratio 3")])
def test_a_piece_filter_that_leaves_a_split_empty_is_refused_at_prepare(tmp_path, setting, named):
    """data.max_pieces 4 dropped all 400 pairs after the tokenizer was trained: preparation went on to "train 0,
    valid 0, test 0", and training failed with "train.max_tokens=400 gives fewer batches than one update needs"."""
    data = corpus_dir(tmp_path, toy_parallel_corpus())
    with pytest.raises(NMTError, match=rf"^the (train|valid|test)[a-z ,]* splits? would be empty after {named} "
                                       r"dropped \d+ pairs"):
        prepare(DataConfig(**{**TOY_DATA, **setting}), data, log=lambda *_: None)
    assert not list((data / "prepared").glob("*")), "nothing half-prepared is left"


def test_one_enormous_word_is_dropped_by_pieces_not_words(tmp_path):
    huge = "a" * 20000  # one whitespace word: max_words lets it through, max_pieces must not
    data = corpus_dir(tmp_path, toy_parallel_corpus() + f"I have {huge}.\tJ'ai {huge}.\n")
    directory = prepare(DataConfig(**TOY_DATA), data, log=lambda *_: None)
    manifest = read_manifest(directory)
    assert manifest["dropped"]["too_many_pieces"] == 1
    assert sum(c["pairs"] for c in manifest["counts"].values()) == 400


def test_training_pairs_unlike_in_length_are_dropped_on_request_and_held_out_pairs_kept(tmp_path):
    """data.max_length_ratio (Moses' clean-corpus-n -ratio, in pieces) drops the misaligned pairs of a crawled corpus
    from training; valid and test are scored as they are. Unset, the data and its directory are as before."""
    pairs = [line.split("\t") for line in toy_parallel_corpus().splitlines()]
    # A source with the next four sentences' translations as its target, as a sentence aligner's slip makes them.
    misaligned = "".join(f"{pairs[k][0]}\t{' '.join(target for _, target in pairs[k:k + 4])}\n" for k in range(40))
    data = corpus_dir(tmp_path, toy_parallel_corpus() + misaligned)
    plain = prepare(DataConfig(**TOY_DATA), data, log=lambda *_: None)
    assert plain == prepare(DataConfig(**TOY_DATA, max_length_ratio=0.0), data, log=lambda *_: None)
    filtered = prepare(DataConfig(**TOY_DATA, max_length_ratio=3.0), data, log=lambda *_: None)
    before, after = read_manifest(plain), read_manifest(filtered)
    held_out = sum(1 for split in ("valid", "test") for line in (filtered / f"{split}.jsonl").open()
                   for reference in json.loads(line)["references"] if reference.count(".") == 4)
    assert "length_ratio" not in before["dropped"] and after["dropped"]["length_ratio"] == 40 - held_out > 0
    assert after["counts"]["train"]["pairs"] == before["counts"]["train"]["pairs"] - (40 - held_out)
    assert after["counts"]["valid"] == before["counts"]["valid"] and after["counts"]["test"] == before["counts"]["test"]
    assert after["dropped"]["too_many_pieces"] == before["dropped"]["too_many_pieces"] == 0


def _training_sources(directory) -> set[str]:
    arrays, source = load_arrays(directory, "train"), Tokenizers.from_dir(directory).source
    return {source.decode(arrays.source(i).tolist()) for i in range(len(arrays))}


def test_held_out_splits_are_capped_leakage_free_and_their_other_sources_train(tmp_path):
    """A corpus of millions of pairs held out 1.7% of its sources for each of valid and test: tens of thousands of
    sentences to decode at every validation and evaluation. data.max_heldout_sources keeps the ones lowest by the
    split's hash (stable), and every pair of the others, whichever their split was, trains."""
    data = corpus_dir(tmp_path, toy_parallel_corpus())
    said = []
    plain = read_manifest(whole := prepare(DataConfig(**TOY_DATA), data, log=said.append))
    assert not any("max_heldout_sources" in line for line in said)  # 40 pairs: far from large
    capped_dir = prepare(DataConfig(**TOY_DATA, max_heldout_sources=10), data, log=said.append)
    capped = read_manifest(capped_dir)
    assert capped_dir != whole and plain["settings"] == fingerprint_settings(DataConfig(**TOY_DATA))
    for split in ("valid", "test"):
        sources, _ = load_references(capped_dir, split)
        before, _ = load_references(whole, split)
        assert len(sources) == capped["counts"][split]["sources"] == 10 < plain["counts"][split]["sources"]
        assert sources == [s for s in before if s in capped_sources(before, "nmt-split-v1", 10)]
        assert not set(sources) & _training_sources(capped_dir), "a held-out source trains"
        moved = set(before) - set(sources)
        assert moved <= _training_sources(capped_dir)
        assert any(line.startswith(f"{split}: 10 of its {len(before)} source sentences held out "
                                   f"(data.max_heldout_sources); the other {len(moved)} (") for line in said)
    assert sum(c["pairs"] for c in capped["counts"].values()) == sum(c["pairs"] for c in plain["counts"].values())


def test_a_large_held_out_split_names_the_cap_in_prepares_log(tmp_path, monkeypatch):
    monkeypatch.setattr("nmt.data.prepare.LARGE_HELDOUT", 20)
    said = []
    prepare(DataConfig(**TOY_DATA), corpus_dir(tmp_path, toy_parallel_corpus()), log=said.append)
    hints = [line for line in said if "data.max_heldout_sources N holds out N sentences" in line]
    assert [line.split(":")[0] for line in hints] == ["valid", "test"]
    assert "(10.0% of the source sentences), each decoded at every validation" in hints[0]


def test_vocabulary_too_small_for_sentencepiece_is_a_clear_error(tmp_path):
    data = corpus_dir(tmp_path, toy_parallel_corpus())
    with pytest.raises(NMTError, match=r"SentencePiece training failed \(data.vocab_size=64\): the vocabulary must "
                       r"hold at least (\d+) pieces \(256 byte pieces, every character kept and the markers\); raise "
                       r"data.vocab_size to \1 or more, set data.byte_fallback: false or lower "
                       r"data.character_coverage$"):
        prepare(DataConfig(**{**TOY_DATA, "vocab_size": 64}), data, log=lambda *_: None)


def test_stale_staging_of_a_killed_prepare_is_removed(tmp_path):
    data = corpus_dir(tmp_path, toy_parallel_corpus())
    stale = data / "prepared" / ".abc123.xyz"
    stale.mkdir(parents=True)
    (stale / "train.npz").write_bytes(b"half")
    prepare(DataConfig(**TOY_DATA), data, log=lambda *_: None)
    assert not stale.exists()


def test_non_utf8_corpus_line_names_file_and_line(tmp_path):
    data = corpus_dir(tmp_path, toy_parallel_corpus())
    (data / "fra-eng" / "fra.txt").write_bytes(b"Go.\tVa !\nCaf\xe9.\tCaf\xe9.\n")
    with pytest.raises(NMTError, match=r"fra.txt line 2: not UTF-8 text"):
        prepare(DataConfig(**TOY_DATA), data, log=lambda *_: None)


def test_a_resumed_run_goes_on_with_its_own_data_only_while_it_is_of_the_same_text_and_settings(tmp_path):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text(toy_parallel_corpus(), encoding="utf-8")
    cfg = DataConfig(**{**TOY_DATA, "corpus": str(corpus), "source_lang": "en", "target_lang": "fr"})
    trained_on = prepare(cfg, tmp_path / "a", log=lambda *_: None)
    assert run_data_for_resume(cfg, tmp_path / "b", trained_on) == trained_on  # nothing under b: no new preparation
    other_settings = DataConfig(**{**TOY_DATA, "corpus": str(corpus), "source_lang": "en", "target_lang": "fr",
                                   "vocab_size": 320})
    assert run_data_for_resume(other_settings, tmp_path / "b", trained_on) is None
    in_c = prepare(cfg, tmp_path / "c", log=lambda *_: None)
    assert run_data_for_resume(cfg, tmp_path / "c", trained_on) == in_c  # the data directory's own wins
    with corpus.open("a", encoding="utf-8") as handle:
        handle.write("I have ten pens.\tJ'ai dix stylos.\n")  # the text changed since: prepare it anew
    assert run_data_for_resume(cfg, tmp_path / "b", trained_on) is None
    corpus.unlink()
    with pytest.raises(NMTError, match="data.corpus not found"):  # a corpus that is gone is the config's error
        run_data_for_resume(cfg, tmp_path / "b", trained_on)


def test_a_vocabulary_smaller_than_asked_for_is_said_and_recorded(tmp_path):
    data = corpus_dir(tmp_path, toy_parallel_corpus())
    messages = []
    directory = prepare(DataConfig(**{**TOY_DATA, "vocab_size": 4000}), data, log=messages.append)
    pieces = read_manifest(directory)["vocabulary"]
    assert pieces["source"] == pieces["target"] < 4000  # the toy text yields a few hundred pieces
    assert f"vocabulary: {pieces['source']:,} pieces (fewer than data.vocab_size=4,000: all this training text " \
           "yields)" in messages
    assert vocabulary_summary({"source": 300, "target": 280}, 300, joint=False) == \
        "vocabulary: source 300 pieces, target 280 pieces (separate) (fewer than data.vocab_size=300: all this " \
        "training text yields)"
    assert vocabulary_summary({"source": 8000, "target": 8000}, 8000, joint=True) == "vocabulary: 8,000 pieces"
    # A borrowed tokenizer was made on its run's text: that run is named, not "all this training text yields".
    assert vocabulary_summary({"source": 300, "target": 280}, 320, joint=False, borrowed_from="runs/parent") == \
        "vocabulary: source 300 pieces, target 280 pieces (separate), runs/parent's (data.tokenizer_from)"


def test_a_test_set_of_ones_own_is_scored_whole_and_older_data_that_cut_it_is_prepared_again(tmp_path):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text(toy_parallel_corpus(), encoding="utf-8")
    long_en, long_fr = " ".join(["cats"] * 60) + ".", " ".join(["chats"] * 60) + "."  # over max_words and max_pieces
    (tmp_path / "test.en").write_text(f"I have two cats.\n{long_en}\n\nI have two cats.\nWe have ten keys.\n")
    (tmp_path / "test.fr").write_text(f"J'ai deux chats.\n{long_fr}\n\nJ'ai 2 chats.\nNous avons dix clés.\n")
    cfg = DataConfig(**{**TOY_DATA, "corpus": str(corpus), "source_lang": "en", "target_lang": "fr",
                        "max_pieces": 32, "test_source_file": str(tmp_path / "test.en"),
                        "test_target_file": str(tmp_path / "test.fr")})
    messages = []
    directory = prepare(cfg, tmp_path / "data", log=messages.append)
    items = [json.loads(line) for line in (directory / "test.jsonl").open(encoding="utf-8")]
    assert items == [{"source": "I have two cats.", "references": ["J'ai deux chats.", "J'ai 2 chats."]},
                     {"source": long_en, "references": [long_fr]},
                     {"source": "We have ten keys.", "references": ["Nous avons dix clés."]}]
    manifest = read_manifest(directory)
    assert manifest["heldout"]["test"] == {"source_file": str(tmp_path / "test.en"), "pairs": 4, "over_max_words": 1,
                                           "dropped": {"empty": 1, "duplicate": 0}}
    assert manifest["counts"]["test"] == {"pairs": 4, "sources": 3} and manifest["dropped"]["too_many_pieces"] == 0
    assert manifest["shards"]["test"][0]["pairs"] == 3  # the dev loss's token arrays leave the long pair out
    assert f"test: 4 pairs from {tmp_path / 'test.en'}, scored whole (1 pair over data.max_words=50 kept; " \
           "1 empty pair left out)" in messages
    # Data prepared before, which dropped long held-out pairs and says nothing of them, is prepared again.
    manifest.pop("heldout")
    (directory / "manifest.json").write_text(json.dumps(manifest))
    again = []
    assert prepare(cfg, tmp_path / "data", log=again.append) == directory and again
    assert "heldout" in read_manifest(directory)


def test_preparation_says_how_a_corpus_of_ones_own_was_read(tmp_path):
    """What is told from the file (a header's columns, CSV quoting, JSON keys) is said, not only done."""
    corpus = tmp_path / "pandas.tsv"
    lines = toy_parallel_corpus().splitlines()
    corpus.write_text("\ten\tfr\n" + "".join(f"{i}\t{line}\n" for i, line in enumerate(lines))
                      + f'{len(lines)}\t"He said ""hi""."\t"Il a dit ""salut""."\n', encoding="utf-8")
    said = []
    cfg = DataConfig(**{**TOY_DATA, "corpus": str(corpus), "source_lang": "en", "target_lang": "fr"})
    prepare(cfg, tmp_path / "data", log=said.append)
    assert said[0] == (f"reading {corpus} as tab-separated text: columns 2 and 3 (named by its header); CSV-quoted "
                       "fields unquoted")
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("".join(json.dumps({"translation": dict(zip(("en", "fr"), line.split("\t")))}) + "\n"
                             for line in lines), encoding="utf-8")
    said.clear()
    prepare(DataConfig(**{**TOY_DATA, "corpus": str(jsonl), "source_lang": "en-GB", "target_lang": "fr"}),
            tmp_path / "data", log=said.append)
    assert said[0] == f"reading {jsonl} as JSON lines: keys en and fr"
    csv_file = tmp_path / "pairs.csv"
    csv_file.write_text("English,French\n" + "".join(line.replace("\t", ",") + "\n" for line in lines),
                        encoding="utf-8")
    said.clear()
    prepare(DataConfig(**{**TOY_DATA, "corpus": str(csv_file), "source_lang": "en", "target_lang": "fr"}),
            tmp_path / "data", log=said.append)
    assert said[0] == f"reading {csv_file} as comma-separated text: columns 1 and 2 (named by its header)"


@pytest.mark.parametrize("form", ["tsv", "jsonl"])
def test_a_held_out_set_may_be_one_file_of_pairs(tmp_path, form):
    """JoeyNMT's dev.tsv and test.tsv hold pairs, as the corpus does: named for both sides of a held-out set, the one
    file is read as the corpus would be (its header, its keys, data.reverse), where it was read twice as two
    line-aligned files and trained "fr<TAB>en" lines as sources and references both."""
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text(toy_parallel_corpus(), encoding="utf-8")
    held = [("I have two cats.", "J'ai deux chats."), ("We have ten keys.", "Nous avons dix clés.")]
    test = tmp_path / f"test.{form}"
    test.write_text("fr\ten\n" + "".join(f"{fr}\t{en}\n" for en, fr in held) if form == "tsv" else
                    "".join(json.dumps({"translation": {"en": en, "fr": fr}}) + "\n" for en, fr in held),
                    encoding="utf-8")
    cfg = DataConfig(**{**TOY_DATA, "corpus": str(corpus), "source_lang": "en", "target_lang": "fr",
                        "test_source_file": str(test), "test_target_file": str(test)})
    directory = prepare(cfg, tmp_path / "data", log=lambda *_: None)
    items = [json.loads(line) for line in (directory / "test.jsonl").open(encoding="utf-8")]
    assert items == [{"source": en, "references": [fr]} for en, fr in held]


def test_joiners_are_kept_by_preparation_and_runs_translate_as_their_data_was_prepared(tmp_path):
    """New preparation keeps ZWNJ/ZWJ (Persian spelling); text without them prepares as before, in the same
    directory; data prepared before from text with them had them stripped, and its runs must translate so too."""
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text(toy_parallel_corpus().replace("cats", "ca\u200cts"), encoding="utf-8")
    cfg = DataConfig(**{**TOY_DATA, "corpus": str(corpus), "source_lang": "en", "target_lang": "fr"})
    directory = prepare(cfg, tmp_path / "data", log=lambda *_: None)
    sources = [json.loads(line)["source"] for line in (directory / "test.jsonl").open(encoding="utf-8")]
    assert any("ca\u200cts" in source for source in sources)
    assert prepared_normalizer(directory, cfg).keep_joiners
    assert "keep_joiners" not in fingerprint_settings(cfg)  # no prepared directory is renamed by it
    manifest = read_manifest(directory)
    del manifest["normalizer"]["keep_joiners"]  # as data prepared before wrote it
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert not prepared_normalizer(directory, cfg).keep_joiners
    del manifest["normalizer"]  # older still: no normalizer recorded
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert not prepared_normalizer(directory, cfg).keep_joiners


def test_a_data_directory_this_user_cannot_write_names_what_to_do(tmp_path, monkeypatch):
    """A shared data directory, read-only for this user, whose data for new settings is not prepared: it said
    "cannot lock DIR: Permission denied", nothing about --data-dir. Root writes anywhere, so the refusal is made
    where the directory is probed (a temp file in it, as for any user)."""
    import errno
    import tempfile

    data = corpus_dir(tmp_path, toy_parallel_corpus())

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refused)
    with pytest.raises(NMTError, match=f"^cannot prepare these settings' data in {data} \\(Permission denied\\): "
                                       "name a data directory of your own with --data-dir$"):
        prepare(DataConfig(**TOY_DATA), data, log=lambda *_: None)
    assert not (data / "prepared").exists()
