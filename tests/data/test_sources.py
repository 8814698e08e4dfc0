"""Any parallel corpus: a TSV of your own, two line-aligned files, the built-in corpus reversed, your own valid/test;
and the one-line errors for what cannot be used."""

import bz2
import dataclasses
import gzip
import hashlib
import io
import json
import lzma
import tarfile
import zipfile

import pytest

from nmt.config import DataConfig, fingerprint_settings, load_config
from nmt.data.prepare import prepare, read_manifest
from nmt.data.download import sha256_file
from nmt.data.sources import (aligned_pairs, corpus_fingerprint, corpus_spec, heldout_pairs, languages,
                              read_pairs, resolve_normalizer)
from nmt.errors import NMTError
from nmt.evaluate import evaluate, load_test_set, read_lines
from nmt.train import train
from nmt.translator import Translator
from tests_helpers import TOY_RUN, nmt, serving_folder, toy_parallel_corpus, write_config

SMALL = {"vocab_size": 300, "valid_fraction": 0.1, "test_fraction": 0.1}


def _pairs():
    return [line.split("\t") for line in toy_parallel_corpus().splitlines()]


def test_the_builtin_fingerprint_is_unchanged():
    # The first release's settings, exactly: English→French data prepared before keeps its directory.
    assert fingerprint_settings(DataConfig()) == {
        "lowercase_source": True, "max_words": 50, "max_pieces": 256, "valid_fraction": 0.017,
        "test_fraction": 0.017, "split_salt": "nmt-split-v1", "vocab_size": 8000, "joint_vocab": True,
        "tokenizer_type": "unigram", "byte_fallback": True, "character_coverage": 0.9999}


def test_reverse_follows_the_languages_of_the_builtin_corpus(toy_zip, tmp_path):
    cfg = DataConfig(reverse=True)
    assert languages(cfg) == ("fr", "en")
    normalizer = resolve_normalizer(cfg)
    assert normalizer.target("I'm Home .") == "i'm home." and normalizer.source("Je Suis\u202f!") == "Je Suis !"
    assert "reverse" in fingerprint_settings(cfg)
    (tmp_path / "fra-eng").mkdir()
    (tmp_path / "fra-eng" / "fra.txt").write_text("Go.\tVa !\nHi.\tSalut !\n")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Va !", "Go."), ("Salut !", "Hi.")]


def test_a_header_names_the_columns_to_read(tmp_path):
    """JoeyNMT's TSVs start with a header naming their columns' languages: before, `de<TAB>en` trained as a pair, and
    `en<TAB>de` under a de→en config trained the direction backwards, silently. The header is skipped, and the
    columns it names are read as the languages the config gives (in any order, beside others)."""
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("de\ten-US\nHallo.\tHello.\n")
    pairs = list(read_pairs(corpus_spec(DataConfig(corpus=str(tsv), source_lang="de", target_lang="en"), tmp_path)))
    assert pairs == [("Hallo.", "Hello.")]
    # data.reverse trains en→de from the same file: the languages still name its sides, as the header does.
    reverse = DataConfig(corpus=str(tsv), source_lang="de", target_lang="en", reverse=True)
    assert list(read_pairs(corpus_spec(reverse, tmp_path))) == [("Hello.", "Hallo.")]
    backwards = DataConfig(corpus=str(tsv), source_lang="en", target_lang="de")  # en→de, as the config says
    assert list(read_pairs(corpus_spec(backwards, tmp_path))) == [("Hello.", "Hallo.")]
    tsv.write_text("Source\tTarget\tlicence\nHallo.\tHello.\tCC-BY\n")  # a dataframe's column names
    assert list(read_pairs(corpus_spec(backwards, tmp_path))) == [("Hallo.", "Hello.")]
    tsv.write_text("\tde\ten\n0\tHallo.\tHello.\n")  # pandas' to_csv, its index first
    assert list(read_pairs(corpus_spec(backwards, tmp_path))) == [("Hello.", "Hallo.")]
    tsv.write_text("deu\teng\nHallo.\tHello.\n")  # Tatoeba's three-letter codes name the same languages
    assert list(read_pairs(corpus_spec(reverse, tmp_path))) == [("Hello.", "Hallo.")]
    tsv.write_text("Hallo.\tHello.\nde\ten\n")  # only a first line can be a header
    assert len(list(read_pairs(corpus_spec(DataConfig(corpus=str(tsv), source_lang="de", target_lang="en"),
                                           tmp_path)))) == 2


def test_a_byte_order_mark_hides_no_header(tmp_path):
    """Excel's "UTF-8 CSV/TSV" and Notepad's UTF-8 start the file with a BOM: `\ufeffen<TAB>fr` was not seen as a
    header and trained as a pair; the mark is no part of the first line of two aligned files either."""
    tsv = tmp_path / "pairs.tsv"
    tsv.write_bytes("\ufeffde\ten\nHallo.\tHello.\n".encode())
    cfg = DataConfig(corpus=str(tsv), source_lang="de", target_lang="en")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hallo.", "Hello.")]
    tsv.write_bytes(gzip.compress("\ufeffHallo.\tHello.\n".encode()))
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hallo.", "Hello.")]
    source, target = tmp_path / "train.de", tmp_path / "train.en"
    source.write_bytes("\ufeffHallo.\n\ufeffTsch\u00fcss.\n".encode())  # only the file's first mark is a BOM
    target.write_bytes("\ufeffHello.\nBye.\n".encode())
    assert list(aligned_pairs(source, target)) == [("Hallo.", "Hello."), ("\ufeffTschüss.", "Bye.")]


def test_mined_pairs_with_their_score_first_never_train_the_score(tmp_path):
    """WikiMatrix and CCMatrix ship score<TAB>source<TAB>target, ParaCrawl's raw releases the pages' URLs first: read
    as columns 1 and 2, scores or URLs trained as the source language in silence. Refused, naming the columns; with
    them set, read."""
    mined = tmp_path / "WikiMatrix.de-en.tsv"
    mined.write_text("1.0494\tDas ist gut.\tThat is good.\n1.04e-1\tJa.\tYes.\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"line 1 starts with a score \(1.0494\) beside 2 columns: mined pairs as "
                                       r"WikiMatrix and CCMatrix write them .* data.source_column: 2 and "
                                       r"data.target_column: 3"):
        list(read_pairs(corpus_spec(DataConfig(corpus=str(mined), source_lang="de", target_lang="en"), tmp_path)))
    chosen = DataConfig(corpus=str(mined), source_lang="de", target_lang="en", source_column=2, target_column=3)
    assert list(read_pairs(corpus_spec(chosen, tmp_path))) == [("Das ist gut.", "That is good."), ("Ja.", "Yes.")]
    crawled = tmp_path / "en-de.raw.tsv"  # ParaCrawl's raw release: the pages' URLs first
    crawled.write_text("https://a.example/en\thttps://a.example/de\tGood.\tGut.\t0.9\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"line 1 starts with a URL beside 4 columns: .* \(there: 3 and 4\)"):
        list(read_pairs(corpus_spec(DataConfig(corpus=str(crawled), source_lang="en", target_lang="de"), tmp_path)))


def test_the_columns_that_hold_the_text_are_chosen_and_tatoebas_ids_never_train(tmp_path):
    """tatoeba.org exports id<TAB>sentence<TAB>id<TAB>sentence: read as columns 1 and 2, ids trained as the source
    language in silence. Refused by default; data.source_column/target_column read any two columns."""
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("1276\tLet's try something.\t2481\tEssayons quelque chose !\n"
                   "1277\tI have to go to sleep.\t2482\tJe dois aller dormir.\n")
    cfg = DataConfig(corpus=str(tsv), source_lang="en", target_lang="fr")
    with pytest.raises(NMTError, match=r"pairs.tsv line 1 reads as tatoeba.org's id<TAB>sentence<TAB>id<TAB>sentence "
                                       r"\(ids 1276 and 2481\): set data.source_column: 2 and data.target_column: 4"):
        list(read_pairs(corpus_spec(cfg, tmp_path)))
    chosen = DataConfig(corpus=str(tsv), source_lang="en", target_lang="fr", source_column=2, target_column=4)
    expected = [("Let's try something.", "Essayons quelque chose !"),
                ("I have to go to sleep.", "Je dois aller dormir.")]
    assert list(read_pairs(corpus_spec(chosen, tmp_path))) == expected
    reverse = DataConfig(corpus=str(tsv), source_lang="en", target_lang="fr", source_column=2, target_column=4,
                         reverse=True)
    assert list(read_pairs(corpus_spec(reverse, tmp_path))) == [(t, s) for s, t in expected]
    tsv.write_text("id\ten\tid\tfr\n1276\tHi.\t2481\tSalut.\n3\tshort\n")  # the header is read in the chosen columns
    with pytest.raises(NMTError, match=r"line 3: expected tab-separated columns 2 and 4, got 2 columns"):
        list(read_pairs(corpus_spec(chosen, tmp_path)))
    assert next(read_pairs(corpus_spec(chosen, tmp_path))) == ("Hi.", "Salut.")
    assert next(read_pairs(corpus_spec(cfg, tmp_path))) == ("Hi.", "Salut.")  # the header alone names them
    swapped = DataConfig(corpus=str(tsv), source_lang="en", target_lang="fr", source_column=4, target_column=2)
    with pytest.raises(NMTError, match=r"line 1 names columns 2 and 4 as the source and the target \(en, fr\), but "
                                       r"data.source_column and data.target_column say 4 and 2"):
        list(read_pairs(corpus_spec(swapped, tmp_path)))
    tsv.write_text("0\tHi.\tSalut.\n1\tRun!\tCours !\n")  # pandas' to_csv(header=False): its index first
    with pytest.raises(NMTError, match=r"line 1 starts with a number \(0\) beside 2 columns: an index or id column"):
        list(read_pairs(corpus_spec(cfg, tmp_path)))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_excels_unicode_text_is_read(tmp_path, encoding):
    """Excel saves "Unicode Text" as UTF-16 with a byte-order mark and CRLF: it was "line 1: not UTF-8 text"."""
    tsv = tmp_path / "pairs.tsv"
    text = "de\ten\r\nHallo.\tHello.\r\nTsch\u00fcss \u2028 da.\tBye.\r\n"  # U+2028 is text, not a line end
    tsv.write_bytes(("\ufeff" + text).encode(encoding) if encoding.endswith("be") else text.encode(encoding))
    cfg = DataConfig(corpus=str(tsv), source_lang="de", target_lang="en")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hallo.", "Hello."), ("Tschüss \u2028 da.", "Bye.")]
    tsv.write_bytes(tsv.read_bytes()[:-1])  # cut mid-character
    with pytest.raises(NMTError, match=r"pairs.tsv: not UTF-16 text, though it starts as such \(truncated data\)"):
        list(read_pairs(corpus_spec(cfg, tmp_path)))


@pytest.mark.parametrize("name,text,encoding", [
    ("pairs.tsv", "de\ten\rHallo.\tHello.\rTsch\u00fcss.\tBye.\r", "utf-8"),
    ("pairs.csv", "de,en\r\"Hallo, du.\",Hello.\rTsch\u00fcss.,Bye.", "utf-8"),  # Excel for Mac's "CSV (Macintosh)"
    ("pairs.tsv", "de\ten\rHallo.\tHello.\rTsch\u00fcss.\tBye.\r", "utf-16"),
])
def test_lines_ending_in_cr_alone_are_lines(tmp_path, name, text, encoding):
    """Classic Mac OS ends lines in CR alone, as Excel for Mac's "Tab Delimited Text (Mac)" and "CSV (Macintosh)" still
    do: read at line feeds only, the whole file was one line, one garbled pair ("the train and test split would be
    empty (1 usable pair)"). A file with no line feed and CRs inside has CR-ended lines; with a line feed, a lone CR
    stays text (below)."""
    corpus = tmp_path / name
    corpus.write_bytes(text.encode(encoding))
    cfg = DataConfig(corpus=str(corpus), source_lang="de", target_lang="en")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hallo, du." if "," in text else "Hallo.", "Hello."),
                                                            ("Tschüss.", "Bye.")]
    if name.endswith(".tsv"):
        corpus.write_text("de\ten\nHal\rlo.\tHello.\n", encoding=encoding)
        assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hal\rlo.", "Hello.")]


def test_hugging_face_translation_json_lines_are_a_corpus(tmp_path):
    """`dataset.to_json("pairs.jsonl")` of a Hugging Face translation dataset writes {"translation": {"de": ..., "en":
    ...}} a line: it was "line 1: expected tab-separated source and target columns, got 1 column". The languages name
    the keys (as a language where none is exact); a sentence's own tab or newline is JSON-escaped text."""
    jsonl = tmp_path / "wmt.jsonl"
    rows = [{"translation": {"de": "Hallo\tWelt.", "en": "Hello world."}},
            {"translation": {"en": "Bye.", "de": "Tschüss."}}]
    jsonl.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows) + "\n", encoding="utf-8")
    cfg = DataConfig(corpus=str(jsonl), source_lang="de-DE", target_lang="en")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hallo\tWelt.", "Hello world."), ("Tschüss.", "Bye."),
                                                            ("", "")]
    flat = tmp_path / "flat.jsonl"  # the languages at the top level, and other fields beside them
    flat.write_text('{"id": 7, "en": "Hi.", "fr": "Salut."}\n', encoding="utf-8")
    reverse = DataConfig(corpus=str(flat), source_lang="en", target_lang="fr", reverse=True)
    assert list(read_pairs(corpus_spec(reverse, tmp_path))) == [("Salut.", "Hi.")]
    for text, message in (('{"en": "Hi.", "fr": "Salut."}\nHi.\tSalut.\n', r"flat.jsonl line 2: not a JSON object "
                                                                           r"of texts by language"),
                          ('{"en": "Hi.", "fr": null}\n', r"flat.jsonl line 1: no fr text \(keys: en, fr\)"),
                          ('{"en": "Hi.", "es": "Hola."}\n', r"flat.jsonl line 1: its keys \(en, es\) name no fr "
                                                              r"text alone: data.source_lang and data.target_lang")):
        flat.write_text(text, encoding="utf-8")
        with pytest.raises(NMTError, match=message):
            list(read_pairs(corpus_spec(reverse, tmp_path)))
    flat.write_text('{"en": "Hi.", "fr": "Salut."}\n', encoding="utf-8")
    with pytest.raises(NMTError, match=r"flat.jsonl is JSON lines, read by the keys .*: data.source_column and "
                                       r"data.target_column pick a TSV's columns \(unset them\)"):
        read_pairs(corpus_spec(DataConfig(corpus=str(flat), source_lang="en", target_lang="fr", target_column=3),
                               tmp_path))
    tsv = tmp_path / "braces.tsv"  # a TSV whose first sentence starts with a brace is still a TSV
    tsv.write_text("{x} is a set.\t{x} est un ensemble.\n", encoding="utf-8")
    assert list(read_pairs(corpus_spec(DataConfig(corpus=str(tsv), source_lang="en", target_lang="fr"), tmp_path))) \
        == [("{x} is a set.", "{x} est un ensemble.")]


def test_csv_quoted_fields_are_unquoted_and_raw_quotes_kept(tmp_path):
    """pandas' to_csv(sep="\\t") and Excel's tab-delimited export wrap a field that holds a quote in quotes and double
    its own: read as it was, `"He said ""hi""."` trained with the doubled quotes. Tatoeba's raw text has quotes in
    fields that are not so: a file with any such is read as it is, even its one `"...""..."` field."""
    import csv

    rows = [("He said \"hi\".", "Il a dit « salut »."), ("\"Go!\"", "« Va ! »"), ("Run.", "Cours.")]
    tsv = tmp_path / "pandas.tsv"
    with open(tsv, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, delimiter="\t", lineterminator="\n").writerows(rows)  # pandas' quoting, QUOTE_MINIMAL
    assert '"He said ""hi""."' in tsv.read_text(encoding="utf-8")
    cfg = DataConfig(corpus=str(tsv), source_lang="en", target_lang="fr")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == rows
    raw = tmp_path / "raw.tsv"
    raw.write_text('"Says who?" "Says me."\t« Qui le dit ? »\n'
                   '"To Tokyo."\t"Pourquoi ?""Pour Tokyo."\n', encoding="utf-8")
    assert list(read_pairs(corpus_spec(DataConfig(corpus=str(raw), source_lang="en", target_lang="fr"), tmp_path))) \
        == [('"Says who?" "Says me."', "« Qui le dit ? »"), ('"To Tokyo."', '"Pourquoi ?""Pour Tokyo."')]


def test_a_csv_is_read_as_csv_and_headers_may_name_languages_in_english(tmp_path):
    """Kaggle's English–French pairs are a CSV headed "English words/sentences,French words/sentences", its fields
    quoted where they hold commas or quotes: read as a TSV it was "expected tab-separated source and target columns,
    got 1 column". A .csv is read by the csv module, and a header may name its languages in English."""
    import csv

    rows = [("Hi, Tom.", "Salut, Tom."), ('He said "no".', "Il a dit « non »."), ("Two\nlines.", "Deux\nlignes.")]
    kaggle = tmp_path / "eng_-french.csv"
    with open(kaggle, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["English words/sentences", "French words/sentences"])
        writer.writerows(rows)
    reverse = DataConfig(corpus=str(kaggle), source_lang="fr", target_lang="en")  # the header says which is which
    assert list(read_pairs(corpus_spec(reverse, tmp_path))) == [(fr, en) for en, fr in rows]
    indexed = tmp_path / "pairs.csv"  # pandas' to_csv: its index first, under an empty header cell
    indexed.write_text(",en,fr\n0,\"Hi, Tom.\",\"Salut, Tom.\"\n", encoding="utf-8")
    cfg = DataConfig(corpus=str(indexed), source_lang="en", target_lang="fr")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hi, Tom.", "Salut, Tom.")]
    indexed.write_text('en,fr\n"Hi, Tom.,Salut.\n', encoding="utf-8")  # a quote never closed
    with pytest.raises(NMTError, match=r"pairs.csv line 2: not comma-separated text as CSV writes it \(unexpected "
                                       r"end of data\)"):
        list(read_pairs(corpus_spec(cfg, tmp_path)))
    excel = tmp_path / "excel-fr.csv"  # Excel where the comma is the decimal mark: semicolons, CRLF, a BOM
    excel.write_bytes("\ufeffEnglish;French\r\n\"Hi; Tom, hi.\";Salut.\r\n".encode("utf-8"))
    assert list(read_pairs(corpus_spec(DataConfig(corpus=str(excel), source_lang="en", target_lang="fr"),
                                       tmp_path))) == [("Hi; Tom, hi.", "Salut.")]
    tsv = tmp_path / "sheet.tsv"  # a spreadsheet's header, in English, on a TSV
    tsv.write_text("German\tEnglish\nHallo.\tHello.\n", encoding="utf-8")
    assert list(read_pairs(corpus_spec(DataConfig(corpus=str(tsv), source_lang="en", target_lang="de"), tmp_path))) \
        == [("Hello.", "Hallo.")]


def test_a_hugging_face_to_csv_is_refused_with_the_way_to_save_it(tmp_path):
    """`dataset.to_csv` writes each pair as one cell, a Python dict, beside an id column where the dataset has one
    (opus_books): read as columns 1 and 2, ids trained into dicts in silence."""
    for name, text in (("books.csv", 'id,translation\n0,"{\'en\': \'Hi.\', \'fr\': \'Salut.\'}"\n'),
                       ("wmt.tsv", "translation\n{'en': 'Hi.', 'fr': 'Salut.'}\n")):
        (tmp_path / name).write_text(text, encoding="utf-8")
        cfg = DataConfig(corpus=str(tmp_path / name), source_lang="en", target_lang="fr")
        with pytest.raises(NMTError, match=rf"{name} line 1 names a column 'translation': a Hugging Face dataset's "
                                           r"to_csv.*Save it as JSON lines instead"):
            list(read_pairs(corpus_spec(cfg, tmp_path)))


def test_one_json_document_is_refused_with_the_way_to_save_json_lines(tmp_path):
    """pandas' to_json and json.dump write one document, not JSON lines: an array of records was "expected
    tab-separated source and target columns, got 1 column", and pandas' default (columns, their rows keyed by
    number) listed every row's number in one error line. A TSV whose first sentence starts with "[" stays a TSV."""
    rows = [{"en": f"Hi {i}.", "fr": f"Salut {i}."} for i in range(50)]
    documents = {"records.json": json.dumps(rows), "pretty.json": json.dumps(rows, indent=2),
                 "columns.json": json.dumps({side: {str(i): row[side] for i, row in enumerate(rows)}
                                             for side in ("en", "fr")}),
                 "hf.json": json.dumps({"translation": {str(i): row for i, row in enumerate(rows)}})}
    for name, text in documents.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        for cfg in (DataConfig(corpus=str(tmp_path / name), source_lang="en", target_lang="fr"),
                    DataConfig(source_file=str(tmp_path / name), target_file=str(tmp_path / name), source_lang="en",
                               target_lang="fr")):
            with pytest.raises(NMTError, match=r"not JSON lines: save one object a line \(pandas: to_json\(path, "
                                               r'orient="records", lines=True\)') as refused:
                list(read_pairs(corpus_spec(cfg, tmp_path)))
            assert len(str(refused.value)) < 400  # not every row's number
    subtitles = tmp_path / "subtitles.tsv"
    subtitles.write_text("[Music] Hello.\t[Musique] Bonjour.\n", encoding="utf-8")
    cfg = DataConfig(corpus=str(subtitles), source_lang="en", target_lang="fr")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("[Music] Hello.", "[Musique] Bonjour.")]


def _read_as_corpus_and_as_both_files(path, expected: list[tuple[str, str]], said: str) -> None:
    """`path`, an English–French file of pairs, read as data.corpus and as one file named for both sides: `expected`,
    and prepare's log told `said`."""
    for cfg in (DataConfig(corpus=str(path), source_lang="en", target_lang="fr"),
                DataConfig(source_file=str(path), target_file=str(path), source_lang="en", target_lang="fr")):
        log = []
        assert list(read_pairs(corpus_spec(cfg, path.parent), log.append)) == expected
        assert log == [said]


def test_fast_align_pairs_are_read(tmp_path):
    """fast_align's and Moses' `source ||| target` lines were "expected tab-separated source and target columns, got
    1 column"; a tab still wins where a line has both."""
    aligned = tmp_path / "corpus.en-fr"
    aligned.write_text("Hi, Tom. ||| Salut, Tom.\nRun! ||| Cours !\n", encoding="utf-8")
    _read_as_corpus_and_as_both_files(aligned, [("Hi, Tom.", "Salut, Tom."), ("Run!", "Cours !")],
                                      f"reading {aligned} as |||-separated text: columns 1 and 2 (the first two)")
    tabbed = tmp_path / "tabbed.tsv"
    tabbed.write_text("a ||| b\tc\n", encoding="utf-8")
    cfg = DataConfig(corpus=str(tabbed), source_lang="en", target_lang="fr")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("a ||| b", "c")]


def test_a_csv_in_a_zip_is_read_as_csv(tmp_path):
    """Kaggle's downloads are `archive.zip` of one `en-fr.csv`: told a CSV by the zip's name only, it was read as a TSV,
    "expected tab-separated source and target columns, got 1 column". The member's name says what the text is, for
    a corpus and for one file named for both sides."""
    archive = tmp_path / "archive.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("en-fr.csv", 'en,fr\n"Hi, Tom.",Salut.\nRun!,Cours !\n')
    _read_as_corpus_and_as_both_files(archive, [("Hi, Tom.", "Salut."), ("Run!", "Cours !")],
                                      f"reading {archive} (en-fr.csv) as comma-separated text: columns 1 and 2 "
                                      "(named by its header)")
    with zipfile.ZipFile(tmp_path / "tabs.zip", "w") as zf:  # a zip of a TSV stays a TSV, commas and all
        zf.writestr("pairs.tsv", "Hi, Tom.\tSalut, Tom.\n")
    tabs = DataConfig(corpus=str(tmp_path / "tabs.zip"), source_lang="en", target_lang="fr")
    assert list(read_pairs(corpus_spec(tabs, tmp_path))) == [("Hi, Tom.", "Salut, Tom.")]


def test_blank_lines_of_a_tsv_are_empty_pairs_that_preparation_counts(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_bytes(b"Hallo.\tHello.\r\n\r\n \t \nTsch\xc3\xbcss.\tBye.\n\n")
    cfg = DataConfig(corpus=str(tsv), source_lang="de", target_lang="en")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hallo.", "Hello."), ("", ""), ("", ""),
                                                            ("Tschüss.", "Bye."), ("", "")]


def _train_translate_evaluate(tmp_path, data: dict, data_dir):
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, data={**SMALL, **data}, model={"num_layers": 2},
                                   train={"max_steps": 300, "eval_every": 300, "save_every": 300}))
    train(cfg, tmp_path / "run", data_dir, log=lambda *_: None)
    engine = Translator.from_run(tmp_path / "run", device="cpu", decode_overrides={"precision": "fp32"})
    test_set = load_test_set(engine.config, "test", None, None, data_dir)
    report = evaluate(engine, test_set, tmp_path / "eval")
    return engine, report


@pytest.mark.slow
def test_a_tsv_of_your_own_trains_translates_and_evaluates(tmp_path):
    # German-style codes and gzip, with a third attribution column: only the first two count.
    tsv = tmp_path / "pairs.tsv.gz"
    with gzip.open(tsv, "wt", encoding="utf-8") as handle:
        handle.writelines(f"{fr}\t{en}\tCC-BY #{i}\n" for i, (en, fr) in enumerate(_pairs()))
        handle.write("\n \t \n")  # blank lines: dropped as empty pairs, and counted
    engine, report = _train_translate_evaluate(
        tmp_path, {"corpus": str(tsv), "source_lang": "fr", "target_lang": "en"}, tmp_path / "data")
    assert (engine.source_lang, engine.target_lang) == ("fr", "en")
    assert report["source_lang"] == "fr" and report["target_lang"] == "en" and report["bleu"] > 20
    assert engine.translate(["J'ai deux chats."])[0].text.startswith("I have")  # case kept: a corpus of your own
    manifest = read_manifest(next((tmp_path / "data" / "prepared").iterdir()))
    assert manifest["source_lang"] == "fr" and manifest["target_lang"] == "en" and manifest["dropped"]["empty"] == 2


@pytest.mark.slow
def test_two_plain_files_with_your_own_test_set(tmp_path):
    pairs = _pairs()
    (tmp_path / "train.en").write_text("".join(en + "\n" for en, _ in pairs))
    (tmp_path / "train.fr").write_text("".join(fr + "\n" for _, fr in pairs))
    held = pairs[::13][:30]  # spread over the grammar: every word is still seen in training
    (tmp_path / "test.en").write_text("".join(en + "\n" for en, _ in held))
    (tmp_path / "test.fr").write_text("".join(fr + "\n" for _, fr in held))
    data = {"source_file": str(tmp_path / "train.en"), "target_file": str(tmp_path / "train.fr"),
            "test_source_file": str(tmp_path / "test.en"), "test_target_file": str(tmp_path / "test.fr"),
            "source_lang": "en", "target_lang": "fr"}
    engine, report = _train_translate_evaluate(tmp_path, data, tmp_path / "data")
    assert report["sentences"] == 30 and report["bleu"] > 20
    prepared = next((tmp_path / "data" / "prepared").iterdir())
    test_sources = [json.loads(line)["source"] for line in (prepared / "test.jsonl").open()]
    assert test_sources == [en for en, _ in held]  # your own test set, in your order, not the hashed split
    assert read_manifest(prepared)["dropped"]["source_in_heldout"] >= 30  # each was a training pair too
    translated = nmt("translate", "--run", tmp_path / "run", "We have two cats.")
    assert translated.returncode == 0 and translated.stdout.strip(), translated.stderr


def _plant(kind: str, t):
    if kind == "one-column":
        (t / "c.tsv").write_text("Hello\tBonjour\nno tab here\n")
    elif kind == "counts":
        (t / "a.txt").write_text("one\ntwo\nthree\n")
        (t / "b.txt").write_text("un\ndeux\n")
    elif kind == "latin1":
        (t / "c.tsv").write_bytes("Hello\tBonjour\ncaf\xe9\tcaf\xe9\n".encode("latin-1"))
    elif kind == "empty-after":
        (t / "c.tsv").write_text("\u200b\t\x07\n \t \n")
    elif kind == "directory":
        (t / "c.tsv").mkdir()
    elif kind == "zip-of-two":
        with zipfile.ZipFile(t / "c.zip", "w") as zf:
            zf.writestr("train.en", "Hello\n")
            zf.writestr("train.fr", "Bonjour\n")
    elif kind == "cut-zip":
        with zipfile.ZipFile(t / "c.zip", "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("fra.txt", "Hello\tBonjour\n" * 1000)
        whole = (t / "c.zip").read_bytes()
        (t / "c.zip").write_bytes(whole[:len(whole) // 2])  # its central directory, at the end, is cut off


BAD = [
    ("one-column", ["--set", "data.corpus={T}/c.tsv"], "c.tsv line 2: expected tab-separated source and target"),
    ("counts", ["--set", "data.source_file={T}/a.txt", "--set", "data.target_file={T}/b.txt"],
     "a.txt has 3 lines but {T}/b.txt has 2"),
    ("latin1", ["--set", "data.corpus={T}/c.tsv"], "c.tsv line 2: not UTF-8 text (byte 3): save it as UTF-8 "
     "(Excel: \"CSV UTF-8\" or \"Unicode Text\""),
    ("empty-after", ["--set", "data.corpus={T}/c.tsv"], "no sentence pairs left"),
    (None, ["--set", "data.corpus=wmt14-en-fr"], "unknown data.corpus 'wmt14-en-fr'"),
    # Empty, with no languages: said "needs its languages", and with them "data.corpus . is not a regular file".
    (None, ["--set", "data.corpus=", "--set", "data.source_lang="], "data.corpus is empty: use tatoeba-fra-eng, or "
     "a path or URL"),
    (None, ["--set", "data.source_lang=English"], "data.source_lang 'English' is not a language code"),
    (None, ["--set", "data.corpus={T}/missing.tsv"], "data.corpus not found"),
    (None, ["--set", "data.corpus=~nosuchuser-nmt/x.tsv"], "data.corpus ~nosuchuser-nmt/x.tsv: no user "
     "'nosuchuser-nmt' on this machine to expand ~nosuchuser-nmt for"),
    ("directory", ["--set", "data.corpus={T}/c.tsv"], "c.tsv is not a regular file (a directory)"),
    ("zip-of-two", ["--set", "data.corpus={T}/c.zip"], "c.zip is an archive of 2 files (train.en, train.fr): a "
     "corpus archive holds one text file, or, as data.source_file and data.target_file, one file per language"),
    ("zip-of-two", ["--set", "data.source_file={T}/c.zip", "--set", "data.target_file={T}/c.zip", "--set",
                    "data.source_lang=en", "--set", "data.target_lang=de"],
     "c.zip is an archive of 2 files (train.en, train.fr), and not exactly one of them ends in .de: a corpus"),
    ("cut-zip", ["--set", "data.corpus={T}/c.zip"], "cannot read {T}/c.zip: File is not a zip file"),
    ("one-column", ["--set", "data.corpus={T}/c.tsv", "--set", "data.source_lang="], "needs its languages"),
    ("counts", ["--set", "data.source_file={T}/a.txt"], "data.source_file and data.target_file go together"),
]


@pytest.mark.parametrize("plant,args,message", BAD, ids=[b[2][:30] for b in BAD])
def test_unusable_corpora_are_one_line_errors_and_write_nothing(tmp_path, plant, args, message):
    if plant:
        _plant(plant, tmp_path)
    langs = ["--set", "data.source_lang=en", "--set", "data.target_lang=fr"]
    given = [a.replace("{T}", str(tmp_path)) for a in args]
    if not any("lang" in a for a in given):
        given = langs + given
    result = nmt("prepare", "--data-dir", tmp_path / "data", *given, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message.replace("{T}", str(tmp_path)) in result.stderr, result.stderr
    assert not (tmp_path / "data" / "prepared").exists() or not any((tmp_path / "data" / "prepared").iterdir())


def test_builtin_reversed_needs_no_languages_and_custom_does():
    assert languages(DataConfig()) == ("en", "fr")
    with pytest.raises(NMTError, match="needs its languages"):
        languages(DataConfig(corpus="x.tsv"))


def test_gzip_is_told_by_its_bytes_not_its_name(tmp_path):
    """A URL's file is named by its path (`.../download?id=7` saves as `download`): a gzipped one read as text was
    "line 1: not UTF-8 text (byte 1)"; a plain file named .gz was "Not a gzipped file"."""
    source, target = tmp_path / "download", tmp_path / "train.fr.gz"
    source.write_bytes(gzip.compress("hello .\ngood night .\n".encode()))
    target.write_text("bonjour .\nbonne nuit .\n", encoding="utf-8")
    assert list(aligned_pairs(source, target)) == [("hello .", "bonjour ."), ("good night .", "bonne nuit .")]


@pytest.mark.parametrize("compress", [bz2.compress, lzma.compress], ids=["bzip2", "xz"])
def test_bzip2_and_xz_are_told_by_their_bytes(tmp_path, compress):
    """OPUS and WMT ship some corpora as .bz2 or .xz: they were "line 1: not UTF-8 text"."""
    source, target = tmp_path / "train.en.bz2", tmp_path / "train.fr"
    source.write_bytes(compress("hello .\ngood night .\n".encode()))
    target.write_text("bonjour .\nbonne nuit .\n", encoding="utf-8")
    assert list(aligned_pairs(source, target)) == [("hello .", "bonjour ."), ("good night .", "bonne nuit .")]
    source.write_bytes(source.read_bytes()[:-8])  # cut: its end is missing
    with pytest.raises(NMTError, match=r"cannot read .*train.en.bz2: "):
        list(aligned_pairs(source, target))


def test_a_manythings_zip_is_a_corpus_as_it_comes(tmp_path):
    """manythings.org's Tatoeba pairs come as zips (deu-eng.zip: deu.txt beside its licence _about.txt), the built-in
    corpus's own form: as data.corpus one was read as text, "line 1: not UTF-8 text (byte 14)"."""
    archive = tmp_path / "deu-eng.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("_about.txt", "CC-BY 2.0 (France)\n")
        zf.writestr("__MACOSX/._deu.txt", b"\x00\x05\x16\x07")
        zf.writestr("deu.txt", "Hi.\tHallo!\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123\nRun!\tLauf!\tCC-BY\n")
    cfg = DataConfig(corpus=str(archive), source_lang="en", target_lang="de")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hi.", "Hallo!"), ("Run!", "Lauf!")]
    for language, text in (("en", "Hi.\nRun!\n"), ("de", "Hallo!\nLauf!\n")):  # a zip of one file: a side
        with zipfile.ZipFile(tmp_path / f"{language}.zip", "w") as zf:
            zf.writestr(f"train.{language}", text)
    assert list(aligned_pairs(tmp_path / "en.zip", tmp_path / "de.zip")) == [("Hi.", "Hallo!"), ("Run!", "Lauf!")]
    # Named for both sides, a file of lines (not pairs) trained a model to copy them: refused.
    (tmp_path / "train.txt").write_text("Hi.\nRun!\n", encoding="utf-8")
    for named, held in (("en.zip", "its train.en's"), ("train.txt", "its")):
        both = DataConfig(source_file=str(tmp_path / named), target_file=str(tmp_path / named), source_lang="en",
                          target_lang="de")
        with pytest.raises(NMTError, match=rf"{named} is named as both the source and the target, but {held} lines "
                                           r"are not pairs \(no tab or \|\|\|, not CSV or JSON lines\)"):
            list(read_pairs(corpus_spec(both, tmp_path)))


def _english_first_zip_is_refused_as_named(tmp_path, language: str, pairs: list[tuple[str, str]], said: str):
    """A manythings.org-style zip of (English, `language`) pairs, named source_lang `language` as its name reads:
    refused, the error naming the settings that read it as it is. Returns the zip."""
    archive = tmp_path / f"{language}-eng.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"{language}.txt", "".join(f"{en}\t{other}\tCC-BY 2.0\n" for en, other in pairs))
    as_named = DataConfig(corpus=str(archive), source_lang=language, target_lang="en")
    with pytest.raises(NMTError, match=rf"the source side of the first pairs {said}: .* Set data.source_lang: en and "
                                       rf"data.target_lang: {language} \(data.reverse: true trains the other "
                                       r"direction\)"):
        list(read_pairs(corpus_spec(as_named, tmp_path)))
    return archive


def test_sides_the_other_way_round_than_their_languages_are_refused(tmp_path):
    """manythings.org's cmn-eng.zip holds English first: named source_lang cmn, target_lang en as its name reads, it
    trained English → Chinese under the name Chinese → English, in silence. Where the two languages are written in
    scripts of their own, the first pairs tell (sharing a script, their commonest words do: the next test)."""
    archive = _english_first_zip_is_refused_as_named(tmp_path, "cmn", [("Hi.", "你好。"), ("Run!", "你跑吧！")],
                                                     r"is written as en is, the target side as cmn")
    right = DataConfig(corpus=str(archive), source_lang="en", target_lang="cmn", reverse=True)
    assert list(read_pairs(corpus_spec(right, tmp_path))) == [("你好。", "Hi."), ("你跑吧！", "Run!")]
    zh, en = tmp_path / "dev.zh", tmp_path / "dev.en"  # held-out files given the other way round
    zh.write_text("你好。\n", encoding="utf-8")
    en.write_text("Hello.\n", encoding="utf-8")
    held_out = DataConfig(corpus=str(archive), source_lang="en", target_lang="cmn", valid_source_file=str(zh),
                          valid_target_file=str(en))
    with pytest.raises(NMTError, match=r"dev.zh is named as the en side and .*dev.en as the cmn: the other way round"):
        list(heldout_pairs((zh, en), corpus_spec(held_out, tmp_path)))
    copy = tmp_path / "train.de"  # the English file copied under the German name: a model learnt to copy
    lines = [f"Sentence number {n}." for n in range(30)]
    (tmp_path / "train.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    copy.write_text("\n".join(lines[:10] + [f"Satz Nummer {n}." for n in range(10, 30)]) + "\n", encoding="utf-8")
    twice = DataConfig(source_file=str(tmp_path / "train.en"), target_file=str(copy), source_lang="en",
                       target_lang="de")
    assert len(list(read_pairs(corpus_spec(twice, tmp_path)))) == 30  # a third the same: names, numbers, "OK."
    copy.write_text("\n".join(lines[:20] + [f"Satz Nummer {n}." for n in range(20, 30)]) + "\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"20 of the first 30 pairs have the same text on both sides: one language's "
                                       r"text named as both the source and the target \(.*train.en and .*train.de\)"):
        list(read_pairs(corpus_spec(twice, tmp_path)))
    correction = DataConfig(source_file=str(tmp_path / "train.en"), target_file=str(copy), source_lang="en",
                            target_lang="en-GB")  # one language on both sides: most sentences stay as they are
    assert len(list(read_pairs(corpus_spec(correction, tmp_path)))) == 30
    latin = tmp_path / "fr-en.tsv"  # French first, named en, fr: too few words to tell, so it reads
    latin.write_text("Salut.\tHi.\n", encoding="utf-8")
    cfg = DataConfig(corpus=str(latin), source_lang="en", target_lang="fr")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Salut.", "Hi.")]


_EN_DE = [("I am here.", "Ich bin hier."), ("You are my friend.", "Du bist mein Freund."),
          ("He is not at home.", "Er ist nicht zu Hause."), ("We have a dog and a cat.", "Wir haben einen Hund und "
          "eine Katze."), ("What is that?", "Was ist das?"), ("The house is very old.", "Das Haus ist sehr alt."),
          ("She was with her mother.", "Sie war mit ihrer Mutter."), ("Is this your book?", "Ist das dein Buch?")]


def test_sides_of_one_script_the_other_way_round_are_refused_by_their_commonest_words(tmp_path):
    """manythings.org's deu-eng.zip (spa-eng, fra-eng, ita-eng...) holds English first: named source_lang de,
    target_lang en as its name reads, it trained English → German under the name German → English, in silence, as
    both are written in Latin letters. Their commonest words tell them apart."""
    archive = _english_first_zip_is_refused_as_named(tmp_path, "de", _EN_DE * 3,
                                                     r"reads as en, the target side as de \(by their commonest words\)")
    right = DataConfig(corpus=str(archive), source_lang="en", target_lang="de", reverse=True)
    assert list(read_pairs(corpus_spec(right, tmp_path)))[0] == ("Ich bin hier.", "I am here.")
    assert len(list(read_pairs(corpus_spec(DataConfig(corpus=str(archive), source_lang="en", target_lang="de"),
                                           tmp_path)))) == 24
    unlisted = DataConfig(corpus=str(archive), source_lang="fy", target_lang="en")  # no list for Frisian: not told
    assert len(list(read_pairs(corpus_spec(unlisted, tmp_path)))) == 24
    de, en = tmp_path / "dev.de", tmp_path / "dev.en"  # held-out files given the other way round
    de.write_text("".join(line + "\n" for line, _ in _EN_DE * 3), encoding="utf-8")  # English in the .de file
    en.write_text("".join(line + "\n" for _, line in _EN_DE * 3), encoding="utf-8")
    held_out = DataConfig(corpus=str(archive), source_lang="en", target_lang="de", valid_source_file=str(en),
                          valid_target_file=str(de))
    with pytest.raises(NMTError, match=r"reads as de, the target side as en .*dev.en is named as the en side and "
                                       r".*dev.de as the de: the other way round"):
        list(heldout_pairs((en, de), corpus_spec(held_out, tmp_path)))


def test_commonest_words_tell_languages_of_one_script_apart():
    from nmt.data.function_words import reads_as

    english, german = [en for en, _ in _EN_DE * 3], [de for _, de in _EN_DE * 3]
    assert reads_as(english, ("de", "en")) == "en" and reads_as(german, ("en", "de")) == "de"
    assert reads_as(english[:2], ("de", "en")) is None  # too few words to be sure
    assert reads_as(["Don\u2019t.", "I can\u2019t."] * 10, ("de", "en")) == "en"  # typographic apostrophes
    assert reads_as(english, ("en", "en-GB")) is None and reads_as(english, ("en", "fy")) is None
    french = ["Je suis ici avec mon ami.", "Il ne peut pas le faire.", "C'est une très bonne idée."] * 5
    spanish = ["Yo estoy aquí con mi amigo.", "Él no puede hacerlo.", "Es una muy buena idea."] * 5
    assert reads_as(french, ("es", "fr")) == "fr" and reads_as(spanish, ("fr", "es")) == "es"
    for language, sentences in (("fi", ["Minä olen kotona.", "Se on hyvä.", "Hän ei ole täällä.", "Mitä sinä teet?"]),
                                ("hu", ["Én otthon vagyok.", "Ez nem jó.", "Mit csinálsz?", "Ő is itt van."]),
                                ("cs", ["Jsem doma.", "To je dobré.", "On není tady.", "Co děláš?"])):
        assert reads_as(sentences * 8, ("en", language)) == language
        assert reads_as(english, (language, "en")) == "en"


def test_an_opus_moses_zip_serves_both_sides(tmp_path):
    """OPUS's Moses downloads (en-fr.txt.zip) hold one file per language beside a README, a LICENSE and the ids:
    data.source_file and data.target_file may both name the zip, each side taking the file of its language (as a
    language: OPUS's zh_cn is a cmn side's)."""
    archive = tmp_path / "en-zh_cn.txt.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, text in (("README", "OPUS Tatoeba"), ("LICENSE", "CC-BY 2.0 FR"), ("Tatoeba.en-zh_cn.xml", "<ids/>"),
                           ("Tatoeba.en-zh_cn.en", "Hi.\nRun!\n"), ("Tatoeba.en-zh_cn.zh_cn", "你好。\n跑！\n")):
            zf.writestr(name, text)
    cfg = DataConfig(source_file=str(archive), target_file=str(archive), source_lang="en", target_lang="cmn")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hi.", "你好。"), ("Run!", "跑！")]
    reverse = DataConfig(source_file=str(archive), target_file=str(archive), source_lang="en", target_lang="zh_CN",
                         reverse=True)
    assert list(read_pairs(corpus_spec(reverse, tmp_path))) == [("你好。", "Hi."), ("跑！", "Run!")]
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("more.en", "Hello.\n")  # now two files end in .en, one of them with 1 line
    with pytest.raises(NMTError, match=r"not exactly one of them ends in .en"):
        list(read_pairs(corpus_spec(cfg, tmp_path)))
    shorter = tmp_path / "short.zip"
    with zipfile.ZipFile(shorter, "w") as zf:
        zf.writestr("a.en", "Hi.\nRun!\n")
        zf.writestr("a.fr", "Salut.\n")
    short = DataConfig(source_file=str(shorter), target_file=str(shorter), source_lang="en", target_lang="fr")
    with pytest.raises(NMTError, match=r"short.zip's .en file has 2 lines but .*short.zip's .fr file has 1 line"):
        list(read_pairs(corpus_spec(short, tmp_path)))


def write_tarball(path, files: dict[str, str], mode: str = "w:gz") -> None:
    """A tarball of text files by name, as WMT, IWSLT and Europarl ship theirs."""
    with tarfile.open(path, mode) as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _counted(function, calls: list):
    def counting(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)
    return counting


@pytest.mark.parametrize("mode", ["w:gz", "w:xz", "w"], ids=["tgz", "txz", "tar"])
def test_a_tarball_serves_as_a_zip_does(tmp_path, monkeypatch, mode):
    """Europarl comes as fr-en.tgz (europarl-v7.fr-en.en and .fr): read as gzipped text, its tar headers trained as
    sentences ("europarl-v7.fr-en.en0000644...ustar rootrootHi."), and said nothing."""
    archive = tmp_path / "fr-en.archive"
    write_tarball(archive, {"training/europarl-v7.fr-en.en": "Hi.\nRun!\n",
                            "training/europarl-v7.fr-en.fr": "Salut.\nCours !\n"}, mode)
    cfg = DataConfig(source_file=str(archive), target_file=str(archive), source_lang="fr", target_lang="en")
    listings = []
    monkeypatch.setattr(tarfile.TarFile, "getmembers", _counted(tarfile.TarFile.getmembers, listings))
    spec = corpus_spec(cfg, tmp_path)
    corpus_fingerprint(spec, None)
    assert list(read_pairs(spec)) == [("Salut.", "Hi."), ("Cours !", "Run!")]
    assert len(listings) == 1  # a listing reads the whole archive: it was made at each of the seven opens
    with pytest.raises(NMTError, match=r"fr-en.archive is an archive of 2 files \(training/europarl-v7.fr-en.en, "
                                       r"training/europarl-v7.fr-en.fr\): a corpus archive holds one text file"):
        list(read_pairs(corpus_spec(DataConfig(corpus=str(archive), source_lang="fr", target_lang="en"), tmp_path)))


def test_a_tarball_of_several_pairs_serves_the_pair_named(tmp_path):
    """WMT's training tarballs hold several pairs (training-parallel-europarl-v7.tgz: cs-en, de-en, fr-en, each with
    its .en): "not exactly one of them ends in .en" for any of them. Each side takes the file named for the pair."""
    archive = tmp_path / "training-parallel-europarl-v7.tgz"
    texts = {"cs-en.cs": "Ahoj.\n", "cs-en.en": "Hi.\n", "de-en.de": "Hallo.\nLauf!\n", "de-en.en": "Hello.\nRun!\n",
             "fr-en.fr": "Salut.\n", "fr-en.en": "Hey.\n"}
    write_tarball(archive, {f"training/europarl-v7.{name}": text for name, text in texts.items()})
    for source, target, expected in (("de", "en", [("Hallo.", "Hello."), ("Lauf!", "Run!")]),
                                     ("en", "fr", [("Hey.", "Salut.")])):
        cfg = DataConfig(source_file=str(archive), target_file=str(archive), source_lang=source, target_lang=target)
        spec = corpus_spec(cfg, tmp_path)
        corpus_fingerprint(spec, None)
        said = []
        assert list(read_pairs(spec, said.append)) == expected
        pair = "-".join(sorted((source, target), key=lambda code: code == "en"))  # WMT names its pairs xx-en
        assert said == [f"reading {archive}'s training/europarl-v7.{pair}.{language} as the {language} side"
                        for language in (source, target)]  # prepare's log says which file each side took
    no_pair = DataConfig(source_file=str(archive), target_file=str(archive), source_lang="en", target_lang="it")
    with pytest.raises(NMTError, match=r"not exactly one of them ends in .en naming the pair en-it or it-en"):
        list(read_pairs(corpus_spec(no_pair, tmp_path)))


def test_xml_other_than_tmx_a_parquet_file_or_a_workbook_is_named_for_what_it_is(tmp_path):
    """TMX is read (tests/data/test_tmx.py); a TMX without units, or other XML, is named as such."""
    parquet, workbook = tmp_path / "train.parquet", tmp_path / "pairs.xlsx"
    parquet.write_bytes(b"PAR1\x15\x04\x15\x10" + bytes(100) + b"PAR1")
    with zipfile.ZipFile(workbook, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("xl/workbook.xml", "<workbook/>")
    tmx, wmt = tmp_path / "en-fr.tmx", tmp_path / "generaltest2022.en-fr.xml"
    tmx.write_text('<?xml version="1.0" encoding="utf-8"?>\n<tmx version="1.4">\n<body/></tmx>\n', encoding="utf-8")
    wmt.write_text('<?xml version="1.0" encoding="utf-8"?>\n<dataset id="generaltest2022">\n', encoding="utf-8")
    for path, message in ((tmx, r"en-fr.tmx is TMX with no translation unit \(<tu>\) in it"),
                          (wmt, r"generaltest2022.en-fr.xml is XML but not TMX: nmt reads pairs as TMX, tab-separated "
                                r"text or JSON lines, or two line-aligned files \(a test set's XML named as both"),
                          (parquet, r"train.parquet is a Parquet file \(a Hugging Face dataset's\?\): save it as "
                                    r"JSON lines"),
                          (workbook, r"pairs.xlsx is an Excel workbook: save it as \"Unicode Text\" or tab-separated")):
        with pytest.raises(NMTError, match=message):
            list(read_pairs(corpus_spec(DataConfig(corpus=str(path), source_lang="en", target_lang="fr"), tmp_path)))


def test_one_tsv_named_for_both_sides_is_read_as_pairs(tmp_path):
    """data.source_file and data.target_file both naming JoeyNMT's train.tsv read each whole line as source and as
    target: a model learnt to copy "de<TAB>en" lines. It is read as the corpus would be, its header included."""
    tsv = tmp_path / "train.tsv"
    tsv.write_text("en\tde\nHello.\tHallo.\n", encoding="utf-8")
    cfg = DataConfig(source_file=str(tsv), target_file=str(tsv), source_lang="de", target_lang="en")
    assert list(read_pairs(corpus_spec(cfg, tmp_path))) == [("Hallo.", "Hello.")]


IWSLT_DEV = """<?xml version="1.0" encoding="UTF-8"?>
<mteval>
<{kind} setid="iwslt2014-dev2010" srclang="german">
<doc docid="535" genre="lectures">
<url>http://www.ted.com/talks/x.html</url>
<description>TED Talk Subtitles and Transcript: {description}</description>
<title>{title}</title>
<seg id="1"> {first} </seg>
<seg id="2">{second}</seg>
</doc>
</{kind}>
</mteval>
"""


def test_iwslt_as_it_comes_is_read_for_its_sentences(tmp_path):
    """IWSLT's de-en.tgz holds TED transcripts with a talk's <url>, <keywords> and <talkid> lines between them
    (train.tags.de-en.de) and test sets as XML (`<seg id="1">`): read as text, the markup trained as sentences and
    a test set's `<doc docid=...>` lines were translated and scored. They are read as fairseq's prepare-iwslt14.sh
    reads them: the metadata lines dropped (a title and description keep their text), a test set's segments only."""
    archive = tmp_path / "de-en.tgz"
    transcripts = {"de": "<url>http://www.ted.com/talks/x.html</url>\n<keywords>talks</keywords>\n<talkid>1</talkid>\n"
                         "<title>Ein Titel</title>\nHallo.\n<speaker>A B</speaker>\nLauf!\n<i>Ja</i>\n",
                   "en": "<url>http://www.ted.com/talks/x.html</url>\n<keywords>talks</keywords>\n<talkid>1</talkid>\n"
                         "<title>A title</title>\nHello.\n<speaker>A B</speaker>\nRun!\nYes\n"}
    write_tarball(archive, {f"de-en/train.tags.de-en.{language}": text for language, text in transcripts.items()})
    dev = {"de": tmp_path / "IWSLT14.TED.dev2010.de-en.de.xml", "en": tmp_path / "IWSLT14.TED.dev2010.de-en.en.xml"}
    dev["de"].write_text(IWSLT_DEV.format(kind="srcset", description="x", title="T", first="Ja &amp; nein.",
                                          second="Zwei."), encoding="utf-8")
    dev["en"].write_text(IWSLT_DEV.format(kind="refset", description="y", title="T", first="Yes &amp; no.",
                                          second="Two."), encoding="utf-8")
    cfg = DataConfig(source_file=str(archive), target_file=str(archive), source_lang="de", target_lang="en",
                     valid_source_file=str(dev["de"]), valid_target_file=str(dev["en"]))
    spec = corpus_spec(cfg, tmp_path)
    assert list(read_pairs(spec)) == [("Ein Titel", "A title"), ("Hallo.", "Hello."), ("Lauf!", "Run!"),
                                      ("<i>Ja</i>", "Yes")]  # a sentence that looks like markup stays, aligned
    assert list(aligned_pairs(dev["de"], dev["en"])) == [("Ja & nein.", "Yes & no."), ("Zwei.", "Two.")]
    assert read_lines(dev["en"]) == ["Yes & no.", "Two."]  # nmt evaluate --src/--ref reads the segments too
    # A test set of no segments is said to be so (it was "every line is empty").
    empty = {side: tmp_path / f"empty.{side}.xml" for side in ("de", "en")}
    for side, kind in (("de", "srcset"), ("en", "refset")):
        empty[side].write_text(f'<?xml version="1.0"?>\n<{kind} setid="x">\n</{kind}>\n', encoding="utf-8")
    no_segments = DataConfig(**{**dataclasses.asdict(cfg), "valid_source_file": str(empty["de"]),
                                "valid_target_file": str(empty["en"])})
    with pytest.raises(NMTError, match=r"empty.de.xml: no valid pairs left after normalization \(it holds no "
                                       r"sentence, read as a test set's XML/SGML: its <seg> lines only\)"):
        prepare(no_segments, tmp_path / "data", log=lambda *_: None)
    # Data prepared before, its markup read as pairs, is not taken for this: the text's fingerprint says how it is read.
    hashed = hashlib.sha256(b"".join(sha256_file(p).encode() for p in (archive, archive, dev["de"], dev["en"])))
    assert corpus_fingerprint(spec, None) != hashed.hexdigest()
    plain = DataConfig(source_file=str(dev["de"].with_suffix(".de")), target_file=str(dev["en"].with_suffix(".en")),
                       source_lang="de", target_lang="en")
    for side in ("de", "en"):
        dev[side].with_suffix(f".{side}").write_text("Hallo.\n", encoding="utf-8")
    files = corpus_spec(plain, tmp_path).files
    assert corpus_fingerprint(corpus_spec(plain, tmp_path), None) == \
        hashlib.sha256(b"".join(sha256_file(p).encode() for p in files)).hexdigest()


def test_wmt_test_sets_and_tagged_files_that_cannot_be_read(tmp_path):
    """WMT's SGML (before 2021) gives its segments as sacrebleu reads them; its XML since 2021 (a source and its
    references in one file) is refused with the way out; counts that differ and a <seg> across lines are named."""
    dev = tmp_path / "IWSLT14.TED.dev2010.de-en.de.xml"
    dev.write_text(IWSLT_DEV.format(kind="srcset", description="x", title="T", first="Ja.", second="Zwei."),
                   encoding="utf-8")
    one_line = tmp_path / "dev.en"
    one_line.write_text("Yes & no.\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"de.xml has 2 sentences but .*dev.en has 1 line: the two files must be"):
        list(aligned_pairs(dev, one_line))
    dev.write_text('<?xml version="1.0"?>\n<srcset>\n<seg id="1">Ja\nnein.</seg>\n', encoding="utf-8")
    with pytest.raises(NMTError, match=r"de.xml line 3: a <seg> that does not end on its line"):
        list(aligned_pairs(dev, one_line))
    sgm = tmp_path / "newstest2014-deen-ref.en.sgm"  # WMT's SGML before 2021: raw text, spaced as sacrebleu reads it
    sgm.write_text('<refset setid="newstest2014">\n<doc sysid="ref" docid="1">\n<p>\n'
                   '<seg id="1">  AT&T &copy  says &lt;no&gt;:  &quot;A\tB&quot; </seg>\n</p>\n', encoding="utf-8")
    assert read_lines(sgm) == ['AT&T &copy says <no>: "A B"']
    wmt22 = tmp_path / "wmttest2022.de-en.xml"  # a source and its references in one file, read with no language
    wmt22.write_text('<?xml version="1.0" encoding="utf-8"?>\n<dataset id="wmttest2022">\n<collection id="general">\n'
                     '<doc id="1" origlang="de">\n<src lang="de">\n<p>\n<seg id="1">Hallo.</seg>\n</p>\n</src>\n'
                     '</doc>\n', encoding="utf-8")
    with pytest.raises(NMTError, match=r"xml: WMT's XML of a source and its references together \(src de\): no "
                                       r"language named to read; .*--echo src"):
        read_lines(wmt22)
    wmt22.write_text('\n<?xml version="1.0"?>\n<refset setid="x">\n</refset>\n', encoding="utf-8")
    with pytest.raises(NMTError, match=r"xml holds no sentence, read as a test set's XML/SGML: its <seg> lines only: "
                                       r"nothing to score"):
        read_lines(wmt22)


def _wmt_block(tag: str, attributes: str, segments: list[tuple[str, str]]) -> str:
    """A `<src>`, `<ref>` or `<hyp>` block of WMT's XML since 2021, an element a line as its files are written."""
    lines = [f'      <{tag} {attributes}>', "        <p>",
             *(f'          <seg id="{n}">{text}</seg>' for n, text in segments), "        </p>", f"      </{tag}>"]
    return "\n".join(lines) + "\n"


WMT22 = ('<?xml version="1.0" encoding="utf-8"?>\n<dataset id="generaltest2022">\n  <collection id="general">\n'
         '    <doc origlang="de" id="doc1" domain="news">\n'
         + _wmt_block("src", 'lang="de"', [("1", "Guten Morgen."), ("2", "Wie  geht &amp; es?")])
         + _wmt_block("ref", 'lang="en" translator="A"', [("2", "How are &amp; you?"), ("1", "Good morning.")])
         + _wmt_block("ref", 'lang="en" translator="B"', [("1", "Morning.")])
         + _wmt_block("hyp", 'system="online-A" lang="en"', [("1", "Good morning!")])
         + '    </doc>\n    <doc origlang="en" id="doc2" domain="news">\n'
         + _wmt_block("src", 'lang="de"', [("1", "Danke."), ("2", "Bitte.")])
         + _wmt_block("ref", 'lang="en" translator="A"', [("2", "You're welcome.")])
         + _wmt_block("ref", 'lang="en" translator="B"', [("1", "Thanks.")])
         + '    </doc>\n    <doc origlang="en" id="doc3" domain="news">\n'
         + _wmt_block("src", 'lang="de"', [("1", "Tschüss.")]) + _wmt_block("ref", 'lang="en" translator="A"', [])
         + "    </doc>\n  </collection>\n</dataset>\n")


def test_wmt_xml_of_a_source_and_its_references_is_read_for_each_side(tmp_path):
    """WMT's XML since 2021 holds the source and every translator's references in one file: it was refused, with
    sacrebleu --echo as the way out. Each side now reads its language: the source's segments, or the first
    translator's references aligned to them by id, a document at a time (one it left out: an empty line; one no
    translator translated, doc3's: left out of both sides, as sacrebleu leaves it out, where it was a source whose
    only reference was an empty line)."""
    xml = tmp_path / "generaltest2022.de-en.xml"
    xml.write_text(WMT22, encoding="utf-8")
    assert read_lines(xml, "de") == ["Guten Morgen.", "Wie geht & es?", "Danke.", "Bitte."]
    assert read_lines(xml, "en-US") == ["Good morning.", "How are & you?", "", "You're welcome."]
    with pytest.raises(NMTError, match=r"xml: WMT's XML of a source and its references together \(src de and ref "
                                       r"en\): no fr side; nmt reads the side in the run's source or target language"):
        read_lines(xml, "fr")
    cfg = DataConfig(corpus=str(tmp_path / "train.tsv"), source_lang="de", target_lang="en",
                     valid_source_file=str(xml), valid_target_file=str(xml))
    (tmp_path / "train.tsv").write_text("Hallo.\tHello.\n", encoding="utf-8")
    assert list(heldout_pairs((xml, xml), corpus_spec(cfg, tmp_path))) == [
        ("Guten Morgen.", "Good morning."), ("Wie geht & es?", "How are & you?"), ("Danke.", ""),
        ("Bitte.", "You're welcome.")]
    reverse = DataConfig(corpus=str(tmp_path / "train.tsv"), source_lang="de", target_lang="en", reverse=True)
    assert list(aligned_pairs(xml, xml, corpus_spec(reverse, tmp_path).column_languages))[0] == \
        ("Guten Morgen.", "Good morning.")


def test_aligned_and_held_out_files_may_be_urls(tmp_path):
    """data.source_file/target_file and the held-out files take http(s) URLs as data.corpus does (downloaded once
    into DATA_DIR/.downloads); before, a URL there was "not found: http:/host/train.en"."""
    www = tmp_path / "www"
    www.mkdir()
    for name, text in {"train.en": "hello .\n", "train.fr": "bonjour .\n", "test.en": "cat .\n",
                       "test.fr": "chat .\n"}.items():
        (www / name).write_text(text)
    with serving_folder(www) as base:
        cfg = DataConfig(source_file=f"{base}/train.en", target_file=f"{base}/train.fr", test_source_file=
                         f"{base}/test.en", test_target_file=f"{base}/test.fr", source_lang="en", target_lang="fr")
        spec = corpus_spec(cfg, tmp_path / "data")
    assert [path.read_text() for path in (*spec.files, *spec.heldout["test"])] == [
        "hello .\n", "bonjour .\n", "cat .\n", "chat .\n"]
    assert all((tmp_path / "data" / ".downloads") in path.parents for path in spec.files)


def test_a_missing_relative_path_says_which_folder_it_was_read_from(tmp_path, monkeypatch):
    """`corpus: pairs.tsv` in a config elsewhere is read from the current directory, not the config's: the error
    said only "data.corpus not found: pairs.tsv"."""
    monkeypatch.chdir(tmp_path)
    cfg = DataConfig(corpus="pairs.tsv", source_lang="en", target_lang="fr")
    with pytest.raises(NMTError, match=rf"^data.corpus not found: pairs.tsv \(a relative path is read from the current "
                                       rf"directory, {tmp_path}, not the config's\)$"):
        corpus_spec(cfg, tmp_path)
    with pytest.raises(NMTError, match=rf"^data.corpus not found: {tmp_path}/gone.tsv$"):  # an absolute one says all
        corpus_spec(dataclasses.replace(cfg, corpus=str(tmp_path / "gone.tsv")), tmp_path)
