"""`nmt score`: the model's log-probability of given translations (teacher forcing, no search), pair by pair.

What it is for: filtering a parallel corpus by the model's confidence, reranking outside candidates, or measuring
how well a model predicts a domain's references (their perplexity). The scores are the ones `nmt translate
--n-best` prints for its own hypotheses: a pair scored here that beam search also found gets the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Iterator

from nmt.data.stream import in_chunks
from nmt.engine_inputs import TargetTooLong
from nmt.engines import Engine
from nmt.errors import NMTError
from nmt.translator import Hypothesis


@dataclass
class Totals:
    """What the pairs scored so far add up to."""

    pairs: int = 0
    pieces: int = 0  # target pieces, EOS included
    log_prob: float = 0.0

    def add(self, scored: Hypothesis) -> None:
        self.pairs += 1
        self.pieces += scored.pieces
        self.log_prob += scored.log_prob

    def describe(self) -> str:
        if not self.pairs:
            return "no pairs scored"
        pairs = f"{self.pairs:,} pair" + ("s" if self.pairs > 1 else "")
        nats = -self.log_prob / self.pieces
        # Past ~709 nats a piece (a diverged model's) math.exp overflows: the perplexity is infinite to a float.
        perplexity = math.inf if nats >= math.log(2) * 1024 else math.exp(nats)  # NaN stays NaN
        return (f"scored {pairs}: {self.pieces:,} target pieces (EOS included), log-probability {self.log_prob:,.2f}, "
                f"perplexity {perplexity:,.2f} per piece")


def pairs_of_lines(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """`source<TAB>target[<TAB>...]` lines (a corpus line, or `paste src tgt`) → (source, target); only a line feed
    (and a CR before it) ends a line. A line without a TAB is an error naming it: pairs must not shift."""
    for number, line in enumerate(lines, 1):
        columns = line.removesuffix("\n").removesuffix("\r").split("\t")
        if len(columns) < 2:
            raise NMTError(f"line {number} has no TAB: score reads source<TAB>target lines (or --src F --tgt F)")
        yield columns[0], columns[1]


def score_stream(engine: Engine, pairs: Iterable[tuple[str, str]], chunk_size: int = 512) -> Iterator[Hypothesis]:
    """Score an unbounded stream of pairs (one per input line) in chunks, one result per pair, in order; a target
    too long for the model is named by its line."""
    done = 0
    for chunk in in_chunks(pairs, chunk_size):
        try:
            scored = engine.score([s for s, _ in chunk], [t for _, t in chunk])
        except TargetTooLong as err:
            raise NMTError(err.said_of(f"the target on line {done + err.index + 1:,}")) from None
        yield from scored
        done += len(chunk)


def score_line(scored: Hypothesis) -> str:
    """`log_prob<TAB>score`: the log-probability of the target's pieces and EOS, and the score beam search ranks by
    (it over the run's length penalty)."""
    return f"{scored.log_prob:.4f}\t{scored.score:.4f}"
