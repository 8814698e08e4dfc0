"""Scores tokenized for the target language, as sacrebleu's own command line would (`-l en-zh`)."""

import importlib.util
import random
import re

import pytest
from sacrebleu import metrics as sacrebleu_metrics

from nmt.errors import NMTError
from nmt.metrics import BLEU, CHRF, base_language, bleu_tokenizer, bootstrap_seed, corpus_scores, paired_bootstrap
from tests_helpers import nmt

HYPOTHESIS, REFERENCE = ["我喜欢猫。"], [["我爱猫。"]]


def test_a_chinese_target_is_scored_with_sacrebleus_chinese_tokenizer():
    # 13a reads an unspaced sentence as one word: BLEU 0 whatever the overlap (what nmt reported before).
    assert corpus_scores(HYPOTHESIS, REFERENCE)["bleu"] == 0.0
    scores = corpus_scores(HYPOTHESIS, REFERENCE, with_ter=True, target_lang="zh-Hans")
    assert scores["bleu"] == 23.64 and "|tok:zh|" in scores["bleu_signature"]
    assert scores["ter"] == 50.0
    assert "|norm:yes|" in scores["ter_signature"] and "|asian:yes|" in scores["ter_signature"]


@pytest.mark.parametrize("language", ["fr", "pt-BR", "de", ""])
def test_languages_written_with_spaces_keep_13a(language):
    scores = corpus_scores(["I have two cats."], [["I have two cats ."]], with_ter=True, target_lang=language)
    assert "|tok:13a|" in scores["bleu_signature"] and "|asian:no|" in scores["ter_signature"]


@pytest.mark.skipif(importlib.util.find_spec("MeCab") is not None, reason="MeCab installed: sacrebleu's ja-mecab")
def test_japanese_without_mecab_falls_back_to_characters_and_says_so_once(capsys):
    bleu_tokenizer.cache_clear()
    for _ in range(2):
        scores = corpus_scores(["猫が好きです。"], [["猫が大好きです。"]], target_lang="ja")
        assert "|tok:char|" in scores["bleu_signature"] and scores["bleu"] > 0
    assert capsys.readouterr().err.count("BLEU for ja wants MeCab (pip install 'sacrebleu[ja]')") == 1


def test_base_language():
    assert [base_language(c) for c in ("zh-Hans", "pt_BR", "JA", "")] == ["zh", "pt", "ja", ""]
    # Tatoeba's ISO 639-3 codes (manythings.org's cmn-eng.zip) and ISO 639-2/B twins name the same languages.
    assert [base_language(c) for c in ("cmn", "yue-Hant", "jpn", "KOR", "fre", "deu", "ber")] == [
        "zh", "zh", "ja", "ko", "fr", "de", "ber"]


def test_a_target_coded_in_three_letters_is_scored_as_its_language():
    """A Mandarin target coded `cmn` was scored with 13a, which sees an unspaced sentence as one word: BLEU 0.0
    where sacrebleu's zh tokenizer gives 42.7."""
    hypotheses, references = ["我喜欢猫。"], [["我喜欢狗。"]]
    chinese = corpus_scores(hypotheses, references, target_lang="zh")
    assert chinese["bleu"] > 40 and "|tok:zh|" in chinese["bleu_signature"]
    assert corpus_scores(hypotheses, references, target_lang="cmn") == chinese


def test_confidence_intervals_come_from_sacrebleus_bootstrap_and_narrow_with_more_sentences():
    import random

    rng = random.Random(0)
    words = "le chat noir dort sur un tapis rouge près de la porte".split()
    references = [[" ".join(rng.sample(words, 6))] for _ in range(200)]
    hypotheses = [r[0] if rng.random() < 0.5 else " ".join(rng.sample(words, 6)) for r in references]
    once = corpus_scores(hypotheses, references, n_bootstrap=1000)
    assert once["bootstrap_samples"] == 1000 and "|bs:1000|seed:12345|" in once["bleu_signature"]
    assert once["bleu"] == corpus_scores(hypotheses, references)["bleu"]  # the score itself is not resampled
    assert 1.0 < once["bleu_ci95"] < 15.0 and 0.5 < once["chrf_ci95"] < 15.0
    # Four times the sentences (the same ones): sampling error shrinks about as 1/sqrt(n), i.e. by half.
    four = corpus_scores(hypotheses * 4, references * 4, n_bootstrap=1000)
    assert 0.35 < four["bleu_ci95"] / once["bleu_ci95"] < 0.65
    assert corpus_scores(hypotheses, [[h] for h in hypotheses], n_bootstrap=100)["bleu_ci95"] == 0.0  # perfect
    assert "bleu_ci95" not in corpus_scores(hypotheses, references)


def test_bootstrap_survives_resamples_that_match_nothing():
    # One sentence matches, one shares no character: a quarter of the resamples hold only the second. sacrebleu's
    # chrF scored those as a Python 0.0 and the rest as float32, and its interval's mean failed on the mix.
    scores = corpus_scores(["le chat noir dort sur le tapis", "zzz"], [["le chat noir dort sur le tapis"], ["qqq"]],
                           n_bootstrap=200)
    assert scores["chrf"] > 0 and scores["chrf_ci95"] > 0 and scores["bleu_ci95"] > 0


def test_the_paired_bootstrap_gives_sacrebleus_own_test():
    """nmt evaluate --compare scores one resample at a time (sacrebleu's PairedTest held two systems' resampled
    statistics at once: 1.47 GiB to compare three systems on 24,000 sentences, 0.58 GiB so); its scores, means,
    intervals and p-values are sacrebleu's, p-values of every size included."""
    from sacrebleu.significance import PairedTest

    words = "le chat est sur la table un chien mange du pain".split()
    draw = random.Random(2)
    references = [" ".join(draw.choices(words, k=draw.randint(3, 9))) for _ in range(200)]

    def system(noise: float) -> list[str]:
        return [" ".join(w if draw.random() > noise else draw.choice(words) for w in r.split()) for r in references]

    systems = [system(0.3), system(0.3), system(0.32), system(0.6)]
    ours = paired_bootstrap(BLEU(), systems, [references], n_samples=300)
    _, theirs = PairedTest([(str(i), s) for i, s in enumerate(systems)], {"BLEU": sacrebleu_metrics.BLEU()},
                           [references], test_type="bs", n_samples=300)()
    assert [(r.score, r.mean, r.ci, r.p_value) for r in ours] == \
        [(r.score, r.mean, r.ci, r.p_value) for r in theirs["BLEU"]]
    assert ours[0].p_value is None and 0.01 < max(r.p_value for r in ours[1:]) < 1  # not all at their floor


def test_the_lean_bootstrap_gives_sacrebleus_own_interval(monkeypatch):
    """nmt's BLEU and chrF resample one bootstrap sample at a time (sacrebleu's own builds them all at once: 1.7 GiB
    for a 24,004-sentence test set); the seed, the resamples, the interval and the signature are sacrebleu's."""
    words = "le chat est sur la table un chien mange du pain".split()
    draw = random.Random(1)
    hypotheses = [" ".join(draw.choices(words, k=draw.randint(3, 9))) for _ in range(300)]
    references = [[" ".join(draw.choices(words, k=draw.randint(3, 9))) for _ in range(300)]]
    import sacrebleu.significance

    resample = sacrebleu.significance._bootstrap_resample
    for ours, theirs in ((BLEU(), sacrebleu_metrics.BLEU()), (CHRF(), sacrebleu_metrics.CHRF())):
        monkeypatch.setattr(sacrebleu.significance, "_bootstrap_resample", None)  # the all-at-once one: unused
        lean = ours.corpus_score(hypotheses, references, n_bootstrap=500)
        monkeypatch.setattr(sacrebleu.significance, "_bootstrap_resample", resample)
        own = theirs.corpus_score(hypotheses, references, n_bootstrap=500)
        assert (str(lean), lean._ci, lean._mean) == (str(own), own._ci, own._mean)
        assert str(ours.get_signature()) == str(theirs.get_signature())
        assert "|bs:500|seed:12345|" in str(ours.get_signature())


@pytest.mark.parametrize("seed", ["abc", "-5", "", "1.5"])
def test_a_bootstrap_seed_sacrebleu_cannot_take_is_named(seed, monkeypatch):
    monkeypatch.setenv("SACREBLEU_SEED", seed)
    with pytest.raises(NMTError, match=re.escape(f"SACREBLEU_SEED={seed!r} is not a whole number or 'none'")):
        bootstrap_seed()


@pytest.mark.parametrize("seed, taken", [(None, ("12345", 12345)), ("7", ("7", 7)), ("None", ("none", None))])
def test_the_bootstrap_seed_as_sacrebleu_reads_it(seed, taken, monkeypatch):
    if seed is None:
        monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    else:
        monkeypatch.setenv("SACREBLEU_SEED", seed)
    assert bootstrap_seed() == taken


def test_evaluate_under_a_bad_bootstrap_seed_stops_before_translating(toy_transformer_run, tmp_path, monkeypatch):
    """It was "internal error ValueError: invalid literal for int()" once every sentence had been translated."""
    monkeypatch.setenv("SACREBLEU_SEED", "abc")
    (tmp_path / "src.txt").write_text("I have two cats.\n")
    (tmp_path / "ref.txt").write_text("J'ai deux chats.\n")
    args = ["evaluate", "--run", toy_transformer_run, "--src", tmp_path / "src.txt", "--ref", tmp_path / "ref.txt"]
    for extra in (["--out-dir", tmp_path / "eval"], ["--compare", toy_transformer_run]):
        result = nmt(*args, *extra)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines()[-1] == ("error: SACREBLEU_SEED='abc' is not a whole number or 'none' (the "
                                                  "bootstrap's seed; unset it for sacrebleu's 12345)"), result.stderr
    assert not (tmp_path / "eval").exists()
