from conftest import toy_corpus_text
from nmt.data.corpus import normalize_pairs
from nmt.data.sources import CorpusSpec, read_pairs
from nmt.data.normalizer import Normalizer
from nmt.data.split import SPLITS, group_references, split_of


def test_normalizer_cleans_and_matches_d2l_style_input():
    norm = Normalizer(lowercase_source=True)
    assert norm.source("i'm home .") == norm.source("I'm home.") == "i'm home."
    assert norm.source("  go\u200b  . ") == "go."
    assert norm.target("Cours\u202f!") == "Cours !"
    assert norm.target("A\u00a0?\u2009B\x07") == "A ? B"
    assert norm.target("e\u0301t\u00e9") == "\u00e9t\u00e9"  # NFC
    assert Normalizer(lowercase_source=False).source("I'm Home .") == "I'm Home."


def test_joiners_are_spelling_and_kept_while_invisible_marks_go():
    """Persian writes می‌خواهم ("I want") with a zero-width non-joiner; Indic conjuncts and emoji sequences need the
    (non-)joiners too. They were removed with the zero-width space, and translations came out misspelt."""
    persian, family = "می\u200cخواهم", "\U0001f469\u200d\U0001f467"
    kept = Normalizer(lowercase_source=False, keep_joiners=True)
    assert kept.source(persian) == persian and kept.target(family) == family
    assert kept.source("\ufeffa\u200bb\u2060c") == "abc"  # BOM, zero-width space and word joiner: no spelling
    assert Normalizer(lowercase_source=False).source(persian) == "میخواهم"  # a record from before: as prepared then


def test_read_two_and_three_columns(tmp_path):
    for columns in (2, 3):
        path = tmp_path / f"c{columns}.txt"
        path.write_text(toy_corpus_text(columns))
        pairs = list(read_pairs(CorpusSpec("builtin", (path,), "en", "fr", False, Normalizer(), {})))
        assert pairs[0] == ("Go.", "Va !") and len(pairs) == 7


def test_normalize_pairs_drops_empty_long_and_duplicates():
    pairs = [("Hi.", "Salut."), ("Hi .", "Salut."), ("", "x"), ("a " * 60, "b"), ("Hi.", "Bonjour.")]
    kept, dropped = normalize_pairs(pairs, Normalizer(), max_words=50)
    assert kept == [("hi.", "Salut."), ("hi.", "Bonjour.")]
    assert dropped == {"empty": 1, "too_long": 1, "duplicate": 1}


def _split(pairs: list[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """The pairs by split, as preparation splits them a pair at a time (nmt/data/stream.py)."""
    splits = {name: [] for name in SPLITS}
    for source, target in pairs:
        splits[split_of(source, "salt", 0.1, 0.1)].append((source, target))
    return splits


def test_split_groups_sentences_and_is_order_independent():
    pairs = [(f"sentence {i % 300}", f"phrase {i}") for i in range(1000)]
    a, b = _split(pairs), _split(list(reversed(pairs)))
    sources = {name: {en for en, _ in split} for name, split in a.items()}
    assert not (sources["train"] & sources["test"]) and not (sources["train"] & sources["valid"])
    assert not (sources["valid"] & sources["test"])
    assert {k: sorted(v) for k, v in a.items()} == {k: sorted(v) for k, v in b.items()}
    assert split_of("sentence 7", "salt", 0.1, 0.1) == split_of("sentence 7", "salt", 0.1, 0.1)
    groups = dict(group_references(a["test"]))
    assert all(len(refs) >= 3 for refs in groups.values())
