"""data.bad_lines: a line of one's own training text that holds no pair stops preparation, or is skipped and counted."""

import json

import pytest

from nmt.config import DataConfig
from nmt.data.bad_lines import BadLines
from nmt.data.prepare import prepare, read_manifest
from nmt.data.sources import corpus_spec, read_pairs
from nmt.errors import NMTError
from tests_helpers import toy_parallel_corpus

SMALL = {"vocab_size": 300, "valid_fraction": 0.1, "test_fraction": 0.1}
NOT_UTF8 = "J'\xe9tais l\xe0.".encode("latin-1")  # a line saved as Windows-1252 in a UTF-8 file


def _read(cfg: DataConfig, tmp_path, skip: bool) -> tuple[list[tuple[str, str]], BadLines]:
    bad = BadLines(skip=skip)
    return list(read_pairs(corpus_spec(cfg, tmp_path), bad=bad)), bad


@pytest.mark.parametrize("name,content,message", [
    ("pairs.tsv", b"Hi.\tSalut.\nno tab here\nBye.\tAu revoir.\n",
     r"pairs.tsv line 2: expected tab-separated source and target columns, got 1 column"),
    ("pairs.tsv", b"Hi.\tSalut.\nI was there.\t" + NOT_UTF8 + b"\nBye.\tAu revoir.\n",
     r"pairs.tsv line 2: not UTF-8 text \(byte 15\)"),
    ("pairs.csv", b'Hi.,Salut.\n"a" b,c\nBye.,Au revoir.\n',
     r"pairs.csv line 2: not comma-separated text as CSV writes it"),
    ("pairs.jsonl", b'{"en": "Hi.", "fr": "Salut."}\n{"en": "I was\n{"en": "Bye.", "fr": "Au revoir."}\n',
     r"pairs.jsonl line 2: not a JSON object of texts by language"),
    ("pairs.jsonl", b'{"en": "Hi.", "fr": "Salut."}\n{"en": "I was.", "fr": null}\n'
                    b'{"en": "Bye.", "fr": "Au revoir."}\n', r"pairs.jsonl line 2: no fr text \(keys: en, fr\)"),
], ids=["missing-tab", "not-utf8", "broken-csv-quote", "cut-json-line", "json-key-null"])
def test_a_bad_line_is_an_error_or_an_empty_pair_and_the_lines_after_it_are_read(tmp_path, name, content, message):
    """A crawled corpus of millions of lines with one broken line could not be prepared at all: the error named the
    line, with no way to skip it short of editing the file."""
    (tmp_path / name).write_bytes(content)
    cfg = DataConfig(corpus=str(tmp_path / name), source_lang="en", target_lang="fr")
    with pytest.raises(NMTError, match=message):
        _read(cfg, tmp_path, skip=False)
    pairs, bad = _read(cfg, tmp_path, skip=True)
    assert pairs == [("Hi.", "Salut."), ("", ""), ("Bye.", "Au revoir.")]
    assert bad.count == 1 and len(bad.first) == 1 and bad.read == 0  # read: counted where prepare asks


def test_a_json_lines_corpus_whose_first_line_is_cut_is_still_read_as_json_lines(tmp_path):
    """Its format is told from its first line with text: a cut one read the file as TSV, every line "expected
    tab-separated source and target columns" (and, skipping, every pair empty)."""
    (tmp_path / "pairs.jsonl").write_bytes(b'{"en": "I was\n{"en": "Hi.", "fr": "Salut."}\n'
                                           b'{"en": "Bye.", "fr": "Au revoir."}\n')
    cfg = DataConfig(corpus=str(tmp_path / "pairs.jsonl"), source_lang="en", target_lang="fr")
    with pytest.raises(NMTError, match=r"pairs.jsonl line 1: not a JSON object of texts by language"):
        _read(cfg, tmp_path, skip=False)
    pairs, bad = _read(cfg, tmp_path, skip=True)
    assert pairs == [("", ""), ("Hi.", "Salut."), ("Bye.", "Au revoir.")] and bad.count == 1


def test_two_aligned_files_stay_aligned_past_a_line_that_is_not_utf8(tmp_path):
    (tmp_path / "train.en").write_bytes(b"Hi.\nI was there.\nBye.\n")
    (tmp_path / "train.fr").write_bytes(b"Salut.\n" + NOT_UTF8 + b"\nAu revoir.\n")
    cfg = DataConfig(source_file=str(tmp_path / "train.en"), target_file=str(tmp_path / "train.fr"),
                     source_lang="en", target_lang="fr")
    with pytest.raises(NMTError, match=r"train.fr line 2: not UTF-8 text"):
        _read(cfg, tmp_path, skip=False)
    pairs, bad = _read(cfg, tmp_path, skip=True)
    assert pairs == [("Hi.", "Salut."), ("I was there.", ""), ("Bye.", "Au revoir.")] and bad.count == 1


def _corpus_with_bad_lines(tmp_path, bad_lines: list[bytes]):
    lines = toy_parallel_corpus().encode().splitlines(keepends=True)
    for index, line in zip((7, 123), bad_lines):
        lines[index] = line + b"\n"
    (tmp_path / "crawl.tsv").write_bytes(b"".join(lines))
    return len(lines)


def test_prepare_skips_and_counts_bad_lines_or_stops_with_the_way_to_skip(tmp_path):
    total = _corpus_with_bad_lines(tmp_path, [b"a line without its tab", b"Tom was.\t" + NOT_UTF8])
    data = {**SMALL, "corpus": str(tmp_path / "crawl.tsv"), "source_lang": "en", "target_lang": "fr"}
    with pytest.raises(NMTError, match=r"crawl.tsv line 8: expected tab-separated source and target columns, got 1 "
                                       r"column \(or data.bad_lines: skip drops the pairs of such lines\)"):
        prepare(DataConfig(**data), tmp_path / "data")
    assert not (tmp_path / "data" / "prepared").exists() or not any((tmp_path / "data" / "prepared").iterdir())
    said = []
    directory = prepare(DataConfig(**data, bad_lines="skip"), tmp_path / "data", log=said.append)
    manifest = read_manifest(directory)
    assert manifest["bad_lines"] == 2 and manifest["dropped"]["empty"] == 2
    assert sum(split["pairs"] for split in manifest["counts"].values()) == total - 2
    skipped = [line for line in said if line.startswith("skipped 2 bad lines")]
    assert len(skipped) == 1 and "crawl.tsv line 8: expected tab-separated" in skipped[0] \
        and "crawl.tsv line 124: not UTF-8 text" in skipped[0]
    assert manifest["settings"]["bad_lines"] == "skip"
    clean = prepare(DataConfig(**{**data, "corpus": _clean_copy(tmp_path)}), tmp_path / "data")
    assert "bad_lines" not in read_manifest(clean) and "bad_lines" not in read_manifest(clean)["settings"]


def _clean_copy(tmp_path) -> str:
    (tmp_path / "clean.tsv").write_text(toy_parallel_corpus(), encoding="utf-8")
    return str(tmp_path / "clean.tsv")


def test_a_file_mostly_of_bad_lines_is_an_error_even_when_skipping(tmp_path):
    """A whole file saved as Windows-1252, skipped line by line, would train on the few lines of plain ASCII."""
    lines = [f"Line {i}.\tL{i} \xe9t\xe9.\n".encode("latin-1") for i in range(60)] + [b"Hi.\tSalut.\n"] * 10
    (tmp_path / "latin1.tsv").write_bytes(b"".join(lines))
    cfg = DataConfig(**SMALL, corpus=str(tmp_path / "latin1.tsv"), source_lang="en", target_lang="fr",
                     bad_lines="skip")
    with pytest.raises(NMTError, match=r"60 of 70 lines of \S*latin1.tsv hold no pair \(data.bad_lines: skip\): "
                                       r"the text is in another encoding or format than it is read as; the first: "
                                       r"\S*latin1.tsv line 1: not UTF-8 text"):
        prepare(cfg, tmp_path / "data")


def test_the_share_of_bad_lines_is_told_per_file_of_two_aligned_ones(tmp_path):
    """Two aligned files with the same 30 of 100 lines saved as Windows-1252 lost 30 pairs, yet their 60 bad lines,
    counted against 100 pairs, read as "most lines bad"; one file saved so whole is still refused."""
    english = [f"Line {i} was there.\n".encode() for i in range(100)]
    french = [f"La ligne {i} y \xe9tait.\n".encode("latin-1") if i % 10 < 3 else f"Ligne {i}.\n".encode()
              for i in range(100)]
    (tmp_path / "train.en").write_bytes(b"".join(line.replace(b"was", b"\xe9") if i % 10 < 3 else line
                                                 for i, line in enumerate(english)))
    (tmp_path / "train.fr").write_bytes(b"".join(french))
    data = {**SMALL, "source_file": str(tmp_path / "train.en"), "target_file": str(tmp_path / "train.fr"),
            "source_lang": "en", "target_lang": "fr", "bad_lines": "skip"}
    said = []
    manifest = read_manifest(prepare(DataConfig(**data), tmp_path / "data", log=said.append))
    assert manifest["bad_lines"] == 60 and sum(split["pairs"] for split in manifest["counts"].values()) == 70
    assert any(line.startswith("skipped 60 bad lines") for line in said)
    (tmp_path / "train.fr").write_bytes(b"".join(f"La ligne {i} y \xe9tait.\n".encode("latin-1") if i % 10 < 6
                                                 else f"Ligne {i}.\n".encode() for i in range(100)))
    with pytest.raises(NMTError, match=r"60 of 100 lines of \S*train.fr hold no pair \(data.bad_lines: skip\)"):
        prepare(DataConfig(**data), tmp_path / "data2")


def test_held_out_files_of_ones_own_are_read_whole_even_when_skipping(tmp_path):
    """A test set is scored whole: a bad line there is an error, not a sentence left out of the score."""
    (tmp_path / "train.tsv").write_text(toy_parallel_corpus(), encoding="utf-8")
    (tmp_path / "test.jsonl").write_text(json.dumps({"en": "Hi.", "fr": "Salut."}) + "\n{cut\n", encoding="utf-8")
    cfg = DataConfig(**SMALL, corpus=str(tmp_path / "train.tsv"), source_lang="en", target_lang="fr",
                     bad_lines="skip", test_source_file=str(tmp_path / "test.jsonl"),
                     test_target_file=str(tmp_path / "test.jsonl"))
    with pytest.raises(NMTError, match=r"test.jsonl line 2: not a JSON object of texts by language"):
        prepare(cfg, tmp_path / "data")
