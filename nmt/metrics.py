"""Corpus scores through sacrebleu (never our own BLEU), with every reference of a sentence used.

BLEU and TER tokenize as sacrebleu itself would for the target language (its CLI's `-l xx-zh` choice): 13a for
languages written with spaces; for Chinese, Japanese and Korean, whose words are not separated by spaces, sacrebleu's
own tokenizers (13a would read a whole sentence as one word: BLEU ~0), and TER's normalization with asian support.
Japanese and Korean need MeCab (`pip install 'sacrebleu[ja]'`, `'sacrebleu[ko]'`); without it BLEU falls back to
characters, said once and visible in the signature (`tok:char`).
"""

from __future__ import annotations

import dataclasses
import functools
import os

from sacrebleu import metrics as sacrebleu_metrics
from sacrebleu.metrics import TER

from nmt.data.languages import UNSPACED, base_language
from nmt.errors import NMTError, warn



@functools.lru_cache(maxsize=None)
def bleu_tokenizer(target_lang: str) -> str | None:
    """sacrebleu's BLEU tokenizer for `target_lang` (None: its default, 13a), or "char" where the one it would pick
    needs an extra that is not installed (said once per language)."""
    language = base_language(target_lang)
    if language not in UNSPACED:
        return None
    try:
        BLEU(trg_lang=language)
    except RuntimeError:  # MeCab missing: sacrebleu asks for pip install sacrebleu[ja] / [ko]
        warn(f"BLEU for {language} wants MeCab (pip install 'sacrebleu[{language}]'); scoring characters instead "
             "(tok:char in the signature)")
        return "char"
    return None


def bootstrap_seed() -> tuple[str, int | None]:
    """SACREBLEU_SEED as sacrebleu reads it (12345 unless set; "none": unseeded), as the signature spells it and as
    numpy takes it. Checked before any decoding (evaluate calls it first), so that a bad value cannot end a long
    evaluation with its translations done and nothing scored."""
    seed = os.environ.get("SACREBLEU_SEED", "12345").lower()
    if seed == "none":
        return seed, None
    if not seed.isdigit():  # numpy takes no negative seed either
        raise NMTError(f"SACREBLEU_SEED={seed!r} is not a whole number or 'none' (the bootstrap's seed; unset it for "
                       f"sacrebleu's 12345)")
    return seed, int(seed)


def _resamples(sentences: int, n_samples: int):
    """sacrebleu's bootstrap resamples: (n_samples, sentences) indices drawn as it draws them (`bootstrap_seed`), so
    that its intervals and p-values come out the same."""
    import numpy as np  # as sacrebleu does: only when resampling

    seed, number = bootstrap_seed()
    rng = np.random.default_rng(number)
    return seed, rng.choice(sentences, size=(n_samples, sentences), replace=True)


def _resampled_scores(metric, stats: list, resamples) -> list:
    """The metric's score of each resample, one at a time: sacrebleu indexes every resample's statistics at once,
    n_samples x sentences x statistics float32s (1.7 of 1.86 GiB peak RSS for a 24,004-sentence test set at 1,000
    samples, where scoring alone takes 0.14 GiB), so a test split of a corpus of millions of pairs could not be
    scored with its interval. The same float32 sums, so the same scores."""
    import numpy as np

    per_sentence = np.array(stats, dtype="float32")
    return [metric._compute_score_from_stats(per_sentence[rows].sum(0)) for rows in resamples]


def lean_bootstrap(metric, stats: list, n_samples: int) -> tuple[str, list]:
    """sacrebleu's `_bootstrap_resample` (the same seed, resamples and scores, so the same interval), scoring one
    resample at a time."""
    seed, resamples = _resamples(len(stats), n_samples)
    return seed, _resampled_scores(metric, stats, resamples)


@dataclasses.dataclass(frozen=True)
class PairedResult:
    score: float
    mean: float  # of the resampled scores
    ci: float  # half the width of their 95% interval
    p_value: float | None  # against the baseline (None: the baseline itself)


def paired_bootstrap(metric, systems: list[list[str]], references: list[list[str | None]],
                     n_samples: int) -> list[PairedResult]:
    """sacrebleu's paired bootstrap test (`PairedTest(test_type="bs")`: Koehn's, as Moses'
    bootstrap-hypothesis-difference-significance.pl) of every system against the first, each scored one resample at
    a time: sacrebleu's held two systems' n_samples x sentences x statistics float32s at once (to compare three
    systems on 24,000 sentences: 1.47 GiB peak RSS and 17.5 s, against 0.58 GiB and 10.7 s so,
    results/evaluate-compare-memory-24k-cpu-bf16.json). The same seed, resamples, scores and p-values as sacrebleu's."""
    import numpy as np
    from sacrebleu.significance import _compute_p_value, estimate_ci

    # sacrebleu seeds each system's draws alike: one set serves all (SACREBLEU_SEED=none: fresh draws, paired still)
    _, resamples = _resamples(len(systems[0]), n_samples)
    results, baseline_score, baseline_resampled = [], None, None
    for hypotheses in systems:
        stats = metric._extract_corpus_statistics(hypotheses, references)
        score = metric._aggregate_and_compute(stats).score
        resampled = np.array([s.score for s in _resampled_scores(metric, stats, resamples)])
        mean, ci = estimate_ci(resampled)
        if baseline_resampled is None:
            baseline_score, baseline_resampled, p_value = score, resampled, None
        else:
            differences = np.abs(resampled - baseline_resampled)
            p_value = _compute_p_value(differences - differences.mean(), abs(baseline_score - score))
        results.append(PairedResult(score, float(mean), float(ci), p_value))
    return results


class LeanBootstrap:
    """A sacrebleu metric whose `corpus_score(..., n_bootstrap=N)` resamples with `lean_bootstrap`."""

    def corpus_score(self, hypotheses, references, n_bootstrap: int = 1):
        self._check_corpus_score_args(hypotheses, references)
        stats = self._extract_corpus_statistics(hypotheses, references)
        score = self._aggregate_and_compute(stats)
        if n_bootstrap > 1:  # the fields sacrebleu's own corpus_score sets: the signature reads them
            self.n_bootstrap = n_bootstrap
            self.seed, resampled = lean_bootstrap(self, stats, n_bootstrap)
            score.estimate_ci(resampled)
        return score


class BLEU(LeanBootstrap, sacrebleu_metrics.BLEU):
    """sacrebleu's BLEU, its confidence interval resampled one sample at a time."""


class CHRF(LeanBootstrap, sacrebleu_metrics.CHRF):
    """sacrebleu's chrF, every score one type. Its bootstrap resamples statistics as float32 and scores a resample
    without a single matching n-gram as a Python 0.0, every other as a numpy float32; `statistics.mean` then fails on
    the mix (sacrebleu 2.6: "don't know how to coerce float and float32"), so `nmt evaluate` of a weak model, whose
    resamples can match nothing, crashed. float() changes no score."""

    def _compute_f_score(self, statistics) -> float:
        return float(super()._compute_f_score(statistics))


def bleu_metric(target_lang: str = "") -> BLEU:
    tokenize = bleu_tokenizer(target_lang)
    return BLEU(tokenize=tokenize) if tokenize else BLEU(trg_lang=base_language(target_lang))


def reference_streams(references: list[list[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists → sacrebleu's streams; sentences with fewer references get None."""
    width = max(len(refs) for refs in references)
    return [[refs[i] if i < len(refs) else None for refs in references] for i in range(width)]


def corpus_bleu(hypotheses: list[str], references: list[list[str]], target_lang: str = "") -> float:
    return round(bleu_metric(target_lang).corpus_score(hypotheses, reference_streams(references)).score, 2)


def corpus_scores(hypotheses: list[str], references: list[list[str]], with_ter: bool = False,
                  target_lang: str = "", n_bootstrap: int = 1) -> dict:
    """BLEU and chrF (and TER, slower, on request) with sacrebleu's signatures. With `n_bootstrap` > 1, also the
    half-width of their 95% confidence intervals by sacrebleu's bootstrap resampling of the sentences (its CLI's
    --confidence; `bs:N|seed:12345` in the signatures): how much BLEU moves with the choice of test sentences."""
    streams = reference_streams(references)
    bleu, chrf = bleu_metric(target_lang), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, streams, n_bootstrap=n_bootstrap)
    chrf_score = chrf.corpus_score(hypotheses, streams, n_bootstrap=n_bootstrap)
    scores = {"bleu": round(bleu_score.score, 2), "chrf": round(chrf_score.score, 2),
              "bleu_detail": str(bleu_score), "bleu_signature": str(bleu.get_signature()),
              "chrf_signature": str(chrf.get_signature())}
    if n_bootstrap > 1:  # sacrebleu 2.x keeps the interval in a private field (its str() prints it as "± ci")
        scores.update(bleu_ci95=round(float(bleu_score._ci), 2), chrf_ci95=round(float(chrf_score._ci), 2),
                      bootstrap_samples=n_bootstrap)
    if with_ter:
        unspaced = base_language(target_lang) in UNSPACED  # TER splits CJK characters only when it normalizes
        ter = TER(normalized=unspaced, asian_support=unspaced)
        scores.update(ter=round(ter.corpus_score(hypotheses, streams).score, 2), ter_signature=str(ter.get_signature()))
    return scores
