"""Corpus scores through sacrebleu (never our own BLEU), with every reference of a sentence used."""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF, TER


def reference_streams(references: list[list[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists → sacrebleu's streams; sentences with fewer references get None."""
    width = max(len(refs) for refs in references)
    return [[refs[i] if i < len(refs) else None for refs in references] for i in range(width)]


def corpus_bleu(hypotheses: list[str], references: list[list[str]]) -> float:
    return round(BLEU().corpus_score(hypotheses, reference_streams(references)).score, 2)


def corpus_scores(hypotheses: list[str], references: list[list[str]], with_ter: bool = False) -> dict:
    """BLEU and chrF (and TER, slower, on request) with sacrebleu's signatures."""
    streams = reference_streams(references)
    bleu, chrf = BLEU(), CHRF()
    bleu_score, chrf_score = bleu.corpus_score(hypotheses, streams), chrf.corpus_score(hypotheses, streams)
    scores = {"bleu": round(bleu_score.score, 2), "chrf": round(chrf_score.score, 2),
              "bleu_detail": str(bleu_score), "bleu_signature": str(bleu.get_signature()),
              "chrf_signature": str(chrf.get_signature())}
    if with_ter:
        ter = TER()
        scores.update(ter=round(ter.corpus_score(hypotheses, streams).score, 2), ter_signature=str(ter.get_signature()))
    return scores
