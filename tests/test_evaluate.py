"""`nmt.evaluate` as a library: where the hypotheses and the report go, and what a failed write leaves."""

import dataclasses
import errno
import os
from pathlib import Path

import pytest

import nmt.evaluate as ev
from nmt.errors import NMTError
from nmt.translator import Translator


def test_an_evaluation_that_cannot_be_written_still_says_its_scores(toy_transformer_run, tmp_path, monkeypatch):
    """The disk fills up while the test set decodes: the error carries the scores and the BLEU signature."""
    def disk_full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(ev, "write_text_atomic", disk_full)
    engine = Translator.from_run(toy_transformer_run, device="cpu")
    with pytest.raises(NMTError) as caught:
        ev.evaluate(engine, ev.EvaluationSet(["I have two cats."], [["J'ai deux chats."]], "probe", "a test"),
                    tmp_path)
    message = str(caught.value)
    assert message.startswith(f"cannot write the evaluation to {tmp_path}: No space left on device (scored: BLEU ")
    assert "nrefs:1|" in message and "\n" not in message


def test_the_output_folder_is_checked_without_creating_anything(tmp_path):
    assert ev.check_writable(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == []  # a bad --split found after this check must leave the run as it was
    (tmp_path / "a-file").write_text("")
    with pytest.raises(NMTError, match=r"a-file/eval: .*a-file is not a directory; choose another place with "
                       r"--out-dir DIR$"):
        ev.check_writable(tmp_path / "a-file" / "eval")


def test_a_report_says_when_its_references_were_lowercased_by_the_runs_normalization(toy_transformer_run, tmp_path):
    """fr→en on the built-in corpus lowercases the English side, its references included: BLEU then ignores case
    although sacrebleu's signature says case:mixed. Files given with --ref are scored as they are."""
    import dataclasses

    engine = Translator.from_run(toy_transformer_run, device="cpu")
    sentences, references = ["I have two cats."], [["J'ai deux chats."]]
    split = ev.EvaluationSet(sentences, references, "test", "test.jsonl", normalized_references=True)
    files = ev.EvaluationSet(sentences, references, "mine", "--src a --ref b")
    assert not engine.normalizer.lowercase_target  # en→fr: the French side keeps its case
    assert ev.evaluate(engine, split, tmp_path)["references_lowercased"] is False
    engine.normalizer = dataclasses.replace(engine.normalizer, lowercase_target=True)
    report = ev.evaluate(engine, split, tmp_path)
    assert report["references_lowercased"] is True
    assert report["bootstrap_samples"] == 1000 and report["bleu_ci95"] == 0.0  # one sentence: every resample is it
    assert f"95% CI ± {report['bleu_ci95']:.2f} BLEU" in ev.format_report(report)
    assert "(1 sentence)" in ev.format_report(report)  # the one sentence's length bucket, in the singular
    assert ev.format_report(report).endswith("these scores do not count case")
    assert ev.evaluate(engine, files, tmp_path)["references_lowercased"] is False


def test_references_not_in_nfc_are_warned_of_and_counted(toy_transformer_run, tmp_path, capsys):
    """A reference file in decomposed Unicode (NFD: macOS file names, some PDF extractions) spells é as e + U+0301:
    scored as given, no é of the translations (NFC, the run's normalization) matched it, and BLEU fell with no word
    of why. Such references are counted in the report and warned of; the prepared splits went through the run's
    normalization and are not checked."""
    import unicodedata

    engine = Translator.from_run(toy_transformer_run, device="cpu")
    references = [["J'ai deux chats."], [unicodedata.normalize("NFD", "Il a été là.")]]
    files = ev.EvaluationSet(["I have two cats.", "He was there."], references, "mine", "--src a --ref b")
    report = ev.evaluate(engine, files, tmp_path)
    assert report["references_not_nfc"] == 1
    assert "warning: 1 sentence of 2 has a reference not in Unicode NFC (the first: sentence 2)" in \
        capsys.readouterr().err
    nfc = ev.EvaluationSet(files.sources, [["J'ai deux chats."], ["Il a été là."]], "mine", "--src a --ref b")
    assert ev.evaluate(engine, nfc, tmp_path)["references_not_nfc"] == 0 and "NFC" not in capsys.readouterr().err


def test_a_report_counts_the_sources_the_engine_read_only_in_part(toy_transformer_run, tmp_path):
    """A test set's sources over decode.max_input_tokens are cut: their BLEU is that of a part, and the report (not
    only the warnings that scroll by) says how many."""
    sources = ["I have two cats.", "I have two cats and three dogs, she said.", "Go."]
    test_set = ev.EvaluationSet(sources, [["J'ai deux chats."], ["J'ai deux chats et trois chiens, dit-elle."],
                                          ["Va !"]], "probe", "a test")
    whole = ev.evaluate(Translator.from_run(toy_transformer_run, device="cpu"), test_set, tmp_path)
    assert whole["sources_cut"] == 0 and "were cut" not in ev.format_report(whole)
    said = []
    engine = Translator.from_run(toy_transformer_run, device="cpu", warn=said.append)
    pieces = [len(engine.tokenizers.source.encode(engine.normalizer.source(s))) for s in sources]
    limit = pieces[0] + 1  # the first fits with its EOS, exactly
    assert pieces[1] >= limit > pieces[2]
    engine = Translator.from_run(toy_transformer_run, device="cpu", warn=said.append,
                                 decode_overrides={"max_input_tokens": limit})
    report = ev.evaluate(engine, test_set, tmp_path)
    assert report["sources_cut"] == 1 and len([line for line in said if "truncated" in line]) == 1
    assert ev.evaluate(engine, test_set, tmp_path)["sources_cut"] == 1  # this evaluation's, not the engine's total
    assert (f"note: 1 of the 3 sources were cut to decode.max_input_tokens {limit} pieces (EOS included): their "
            "translations miss the rest") in ev.format_report(report)


def test_a_report_scores_with_the_tokenizer_of_the_engines_target_language(toy_transformer_run, tmp_path):
    engine = Translator.from_run(toy_transformer_run, device="cpu")
    test_set = ev.EvaluationSet(["I have two cats."], [["J'ai deux chats."]], "probe", "a test")
    assert "|tok:13a|" in ev.evaluate(engine, test_set, tmp_path)["bleu_signature"]  # French
    engine.target_lang = "zh"  # as a run of an en→zh corpus says
    report = ev.evaluate(engine, test_set, tmp_path)
    assert "|tok:zh|" in report["bleu_signature"] and "|asian:yes|" in report["ter_signature"]


def test_length_buckets_count_characters_for_an_unspaced_source():
    sources = ["我爱猫。", "我 有 两 只 猫 和 三 只 狗 还有 一只 鸟 。"]  # 4 and 15 characters (spaces not counted)
    hypotheses, references = ["x", "y"], [["x"], ["y"]]
    by_words = ev.length_buckets(sources, hypotheses, references, "en", "fr")
    assert [(b["bucket"], b["sentences"]) for b in by_words] == [("1-5", 1), ("6-10", 0), ("11-15", 1), ("16+", 0)]
    by_characters = ev.length_buckets(sources, hypotheses, references, "en", "zh")
    assert [(b["bucket"], b["sentences"]) for b in by_characters] == [("1-10", 1), ("11-20", 1), ("21-30", 0),
                                                                       ("31+", 0)]
    assert ev.length_unit("zh-Hant") == "characters" and ev.length_unit("de") == "words"


def test_phrases_held_count_words_of_their_own_and_a_repeated_phrase_as_often_as_it_stands():
    hypotheses = ["Le chat voit le chat.", "Les chatons dorment.", "猫が猫を見る", ""]
    constraints = [["chat", "chat", "voit"], ["chat"], [], []]
    assert ev.phrases_held(hypotheses[:2], constraints[:2], "fr") == {
        "sentences": 2, "phrases": 4, "held": 3, "held_share": 0.75}  # not inside `chatons`
    once = ev.phrases_held(["Le chat dort."], [["chat", "chat"]], "fr")
    assert (once["held"], once["phrases"]) == (1, 2)  # asked twice, held once
    assert ev.phrases_held(hypotheses[2:3], [["猫", "猫", "犬"]], "ja")["held"] == 2  # unspaced: anywhere
    assert ev.phrases_held(hypotheses[3:], [[]], "fr")["held_share"] is None


def test_src_and_ref_files_split_at_line_feeds_only_and_drop_a_bom(tmp_path):
    """As on stdin and in corpora: a U+2028, U+0085 or lone CR inside a sentence does not end it (splitlines would
    shift every reference after it), CRLF endings and a Windows editor's BOM are not part of the text."""
    path = tmp_path / "refs.txt"
    path.write_bytes("\ufeffJe suis\u2028là.\r\nUn\rdeux\x85trois\n\nfin".encode("utf-8"))
    assert ev.read_lines(path) == ["Je suis\u2028là.", "Un\rdeux\x85trois", "", "fin"]
    path.write_text("une\ndeux\n", encoding="utf-8")
    assert ev.read_lines(path) == ["une", "deux"]
    path.write_text("une\r\ndeux\r\n", encoding="utf-16")  # Excel's "Unicode Text": its BOM tells it
    assert ev.read_lines(path) == ["une", "deux"]
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(NMTError, match=r"refs.txt: not UTF-16 text, though it starts as such"):
        ev.read_lines(path)
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(NMTError, match=r"refs.txt line 1: not UTF-8 text \(byte 3\)"):
        ev.read_lines(path)


def test_src_and_ref_files_with_lines_ending_in_cr_alone_are_read_line_by_line(tmp_path, monkeypatch):
    """A classic Mac OS text (no line feed, lines ended by CR) was one line: one sentence of the whole file, translated
    and scored against one reference of the whole reference file, with no word of why."""
    import io

    path = tmp_path / "refs.txt"
    for data in (b"Je suis l\xc3\xa0.\rUn deux.\r", b"Je suis l\xc3\xa0.\rUn deux.",
                 "Je suis là.\rUn deux.\r".encode("utf-16")):
        path.write_bytes(data)
        assert ev.read_lines(path) == ["Je suis là.", "Un deux."], data
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert ev.read_lines(Path("-")) == ["Je suis là.", "Un deux."], data
    path.write_bytes(b"une\r")  # one line, its CR the ending
    assert ev.read_lines(path) == ["une"]


def test_src_and_ref_files_are_read_compressed_or_zipped_as_corpora_are(tmp_path, monkeypatch):
    """`--src newstest.en.gz` was "not UTF-8 text (byte 1)": the corpus reader read gzip, bzip2, xz and zip, the
    test set's did not. A pipe or stdin, read whole, is decompressed too; an archive there names no one file."""
    import bz2
    import gzip
    import io
    import lzma
    import zipfile

    text = "\ufeffJe suis là.\r\nUn\u2028deux\n".encode("utf-8")
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("newstest.fr", text)
    for name, data in (("refs.gz", gzip.compress(text)), ("refs.bz2", bz2.compress(text)),
                       ("refs.xz", lzma.compress(text)), ("refs.zip", zipped.getvalue()),
                       ("refs.txt", "Je suis là.\nUn\u2028deux\n".encode("utf-16"))):
        (tmp_path / name).write_bytes(data)
        assert ev.read_lines(tmp_path / name) == ["Je suis là.", "Un\u2028deux"], name
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
        if name == "refs.zip":
            with pytest.raises(NMTError, match=r"^- is an archive: save its file of sentences and name that file$"):
                ev.read_lines(Path("-"))
        else:
            assert ev.read_lines(Path("-")) == ["Je suis là.", "Un\u2028deux"], name
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\x1f\x8b\x08\x00cut")))
    with pytest.raises(NMTError, match=r"^cannot read -: "):
        ev.read_lines(Path("-"))


def test_a_tsv_of_pairs_given_as_src_is_refused(tmp_path):
    """`--src test.tsv` translated each source<TAB>target line whole (the TAB read as a space) and scored it."""
    tsv, refs = tmp_path / "test.tsv", tmp_path / "refs.txt"
    tsv.write_text("Hello.\tBonjour.\n\nBye.\tSalut.\n", encoding="utf-8")
    refs.write_text("Bonjour.\n\nSalut.\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"every line of .*test.tsv holds a TAB: a file of source<TAB>target pairs\? "
                                       r"Give each side as its own file: --src <\(cut -f1 .*test.tsv\)"):
        ev.load_test_set(None, "test", tsv, [refs], tmp_path)
    with pytest.raises(NMTError, match=r"every line of .*test.tsv holds a TAB"):  # given as the references
        ev.load_test_set(None, "test", refs, [tsv], tmp_path)
    tsv.write_text("Hello.\tBonjour.\nNo.\nBye.\n", encoding="utf-8")  # a TAB in some sources only: read as they are
    refs.write_text("Bonjour.\nNon.\nSalut.\n", encoding="utf-8")
    assert ev.load_test_set(None, "test", tsv, [refs], tmp_path).sources == ["Hello.\tBonjour.", "No.", "Bye."]


def test_a_reference_file_given_twice_is_refused_before_decoding(tmp_path):
    """`--ref ref.1 --ref ref.1` (a typo for ref.2) scored as one reference (BLEU and chrF take a reference set once
    however often it is given), with no word that the second set was not the one meant."""
    src, refs = tmp_path / "src.txt", tmp_path / "refs.txt"
    src.write_text("Hello.\nBye.\n", encoding="utf-8")
    refs.write_text("Bonjour.\nSalut.\n", encoding="utf-8")
    for second in (refs, tmp_path / "." / "refs.txt"):
        with pytest.raises(NMTError, match=r"^--ref .*refs.txt is given twice: name each reference set once"):
            ev.load_test_set(None, "test", src, [refs, second], tmp_path)


def test_a_source_without_a_reference_is_named_by_its_line_before_decoding(tmp_path):
    """An empty line in every --ref file leaves its source no reference: the error said only "every source sentence
    needs at least one reference", naming no file and no line."""
    src, ref_a, ref_b = tmp_path / "test.en", tmp_path / "a.fr", tmp_path / "b.fr"
    src.write_text("Hello.\nYes.\nNo.\n", encoding="utf-8")
    ref_a.write_text("Bonjour.\n\nNon.\n", encoding="utf-8")
    ref_b.write_text("Salut.\nOui.\n\n", encoding="utf-8")
    assert ev.load_test_set(None, "test", src, [ref_a, ref_b], tmp_path).references == \
        [["Bonjour.", "Salut."], ["Oui."], ["Non."]]  # a missing reference of one set: the other set's
    with pytest.raises(NMTError, match=r"^sentence 2 of --src \S*test.en --ref \S*a.fr has no reference \(every "
                                       r"reference of it is empty\): every source sentence needs at least one \(1 "
                                       r"sentence has none\)$"):
        ev.load_test_set(None, "test", src, [ref_a], tmp_path)
    for path in (src, ref_a, ref_b):  # a blank line at the end of every file
        path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"^sentence 4 of --src \S*test.en --ref \S*a.fr --ref \S*b.fr has no "
                                       r"reference \(every reference of it is empty; so is the source: remove its "
                                       r"line from every file\)"):
        ev.load_test_set(None, "test", src, [ref_a, ref_b], tmp_path)


def test_a_sampled_evaluation_is_named_and_described_as_such(toy_transformer_run, tmp_path):
    engine = Translator.from_run(toy_transformer_run, device="cpu",
                                 decode_overrides={"beam_size": 1, "sampling_topk": 0, "sampling_seed": 3})
    report = ev.evaluate(engine, ev.EvaluationSet(["I have two cats."], [["J'ai deux chats."]], "probe", "a test"),
                         tmp_path)
    assert report["label"] == "probe.sampled" and (tmp_path / "probe.sampled.report.json").is_file()
    assert "sampled: top-k 0, top-p 1.0, temperature 1.0, seed 3" in ev.format_report(report)


def test_another_checkpoint_s_evaluation_sits_beside_the_default_s(toy_transformer_run, tmp_path):
    """`nmt evaluate --checkpoint last` wrote test.beam5.report.json over the default checkpoint's report."""
    from pathlib import Path

    test_set = ev.EvaluationSet(["I have two cats.", "Go."], [["J'ai deux chats."], ["Va !"]], "probe", "a test")
    default = Translator.from_run(toy_transformer_run, device="cpu")
    assert default.checkpoint_label is None
    beam = default.decode.beam_size
    ev.evaluate(default, test_set, tmp_path)
    named = {}
    for given in ("best", "last"):
        engine = Translator.from_run(toy_transformer_run, checkpoint=Path(given), device="cpu")
        named[given] = engine.checkpoint_label
        ev.evaluate(engine, test_set, tmp_path)
    # The default is best.pt (no averaged.pt): naming it is the default's own report; last.pt gets its own.
    assert default.checkpoint.name == "best.pt" and named == {"best": None, "last": "last"}
    assert sorted(path.name for path in tmp_path.glob("*.report.json")) == [
        f"probe.beam{beam}.report.json", f"probe.last.beam{beam}.report.json"]


def test_a_system_identical_to_the_baseline_is_not_called_significant():
    references = [["the cat sat on the mat ."], ["a dog ran ."], ["we are home ."], ["it is late ."]]
    baseline = ["the cat sat on a mat .", "a dog runs .", "we are home .", "it is late ."]
    other = ["a cat sat .", "the dog ran .", "we are at home .", "it is late ."]
    compared = ev.compare([("a", baseline), ("b", list(baseline)), ("c", other)], references, samples=200)
    assert [row["identical"] for row in compared.rows] == [False, True, False]
    assert compared.rows[1]["p_value"] == 1.0 and compared.rows[2]["p_value"] < 1.0
    table = ev.format_comparison(compared).splitlines()
    assert table[1].endswith("(baseline)") and table[2].endswith("(identical)") and table[3].split()[-1][0] == "0"


def test_src_and_ref_files_the_other_way_round_are_refused_before_decoding():
    """`--src test.fr --ref test.en` on an en→fr run translated the French and scored it against the English: BLEU
    near zero, and no word of why."""
    english = ["I am here.", "You are my friend.", "What is that?", "The house is very old.", "Is this your book?"] * 4
    french = ["Je suis ici.", "Tu es mon ami.", "Qu'est-ce que c'est ?", "La maison est très vieille.",
              "Est-ce ton livre ?"] * 4
    swapped = ev.EvaluationSet(french, [[line] for line in english], "test", "--src test.fr --ref test.en")
    with pytest.raises(NMTError, match=r"^the --src sentences read as fr and the --ref ones as en, but the run "
                                       r"translates en→fr: --src and --ref the other way round\?$"):
        ev.refuse_swapped_files(swapped, "en", "fr")
    ev.refuse_swapped_files(dataclasses.replace(swapped, sources=english, references=[[f] for f in french]), "en",
                            "fr")
    ev.refuse_swapped_files(swapped, "", "")  # an export of unknown languages: not told
    chinese = ev.EvaluationSet(["你好。"] * 30, [["Hello."]] * 30, "test", "--src a --ref b")
    ev.refuse_swapped_files(chinese, "cmn", "en")
    with pytest.raises(NMTError, match=r"read as en and the --ref ones as cmn"):  # by script
        ev.refuse_swapped_files(dataclasses.replace(chinese, sources=["Hello."] * 30, references=[["你好。"]] * 30),
                                "cmn", "en")
    ev.refuse_swapped_files(dataclasses.replace(swapped, normalized_references=True), "en", "fr")  # a split: told
    with pytest.raises(NMTError, match=r"^the --src sentences read as fr and the --tgt ones as en, .* --src and --tgt "
                                       r"the other way round\?$"):  # nmt score's files
        ev.refuse_swapped(french, english, ("en", "fr"), ("--src", "--tgt"))
