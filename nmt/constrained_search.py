"""Lexical constraints for beam search: every translation of a sentence contains given target phrases, in any order (a
term's agreed translation, a name spelt one way), as fairseq's `--constraints` does, after Post & Vilar (2018),
"Fast lexically constrained decoding with dynamic beam allocation", in the vectorized form of Hu et al. (2019).

Each beam carries how far it has met its sentence's phrases: a bit per phrase it holds whole, and for each of the
others how many of its first pieces the hypothesis ends with. Each step's candidates are beam search's 2K best
extensions and, for every beam, its own best continuation and each piece that meets more of a phrase (the one after
each phrase's start in place), at the price the model puts on it. The K beams kept are striped across banks, one per
count of constraint pieces met: the best candidate of each bank, fullest first, then the second best of each, and so
on, so that a beam that has placed more of the phrases survives its lower score, and beams that placed fewer still
explore. A hypothesis may end only when it holds every phrase.

What is matched is pieces: a phrase is tokenized on its own, as a translation's word (`maison` is `▁maison`), and is
met where a word starts with its pieces and ends with them: a piece that would glue letters onto its last word
(`▁maison` `nette`, `▁bientôt` `s`) takes the phrase back (for a target written with spaces; in Chinese, Japanese or
Korean any piece may follow). Without that rule the demo model met 3% of its words inside longer ones (`bientôts`,
`entrés`) on its valid split. Every phrase not yet met is followed at once, each by its own longest start that the
hypothesis ends with (Knuth-Morris-Pratt): a phrase that overlaps itself (`a a b` in `a a a b`) or phrases that
start alike (`New York`, `New Jersey`) are met wherever they stand, as fairseq's trie of partial matches finds them.
Tracking one phrase at a time, as this search first did, missed both. A phrase given twice must stand twice, as
fairseq's and Sockeye's constraints count (one occurrence met every copy until 2026-11-29); occurrences that overlap
count once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from nmt.data.tokenizer import EOS_ID, PAD_ID

MAX_PHRASES = 16  # per sentence: the phrases met are bits of one integer, and the banks their pieces + 1


@dataclass(frozen=True)
class ConstraintBatch:
    """Each sentence's phrases as target piece ids: `pieces` (B, C, L), PAD past each phrase's `lengths` (B, C); a
    sentence with fewer than C phrases has slots of length 0. `continues_word` (V,): the pieces that glue onto the
    word before them (`word_continuations`); None: any piece may follow a phrase."""

    pieces: torch.Tensor
    lengths: torch.Tensor
    borders: torch.Tensor  # (B, C, L): each phrase's `borders_of`
    twins: torch.Tensor  # (B, C, C): [c', c] True where phrase c' < c is the same phrase (given again)
    continues_word: torch.Tensor | None = None

    @classmethod
    def of(cls, phrases: list[list[list[int]]], device: torch.device,
           continues_word: torch.Tensor | None = None) -> "ConstraintBatch":
        """From each sentence's phrases (a list of piece-id lists each; an empty list: none)."""
        count = max((len(p) for p in phrases), default=0)
        width = max((len(ids) for p in phrases for ids in p), default=0)
        if count > MAX_PHRASES:
            raise ValueError(f"at most {MAX_PHRASES} phrases a sentence, not {count}")
        pieces = torch.full((len(phrases), max(count, 1), max(width, 1)), PAD_ID, dtype=torch.long)
        lengths = torch.zeros(len(phrases), max(count, 1), dtype=torch.long)
        borders = torch.zeros_like(pieces)
        for i, sentence in enumerate(phrases):
            for c, ids in enumerate(sentence):
                if not ids:
                    raise ValueError("a constraint phrase of no pieces")
                pieces[i, c, :len(ids)] = torch.tensor(ids)
                lengths[i, c] = len(ids)
                borders[i, c] = torch.tensor(borders_of(ids, pieces.shape[2]))
        same = pieces.unsqueeze(2).eq(pieces.unsqueeze(1)).all(-1) & lengths.unsqueeze(2).eq(lengths.unsqueeze(1))
        twins = same & lengths.gt(0).unsqueeze(2) & torch.ones(same.shape[1:], dtype=torch.bool).triu(1)
        return cls(pieces.to(device), lengths.to(device), borders.to(device), twins.to(device),
                   None if continues_word is None else continues_word.to(device))

    @property
    def total_pieces(self) -> torch.Tensor:
        """(B,) the pieces every translation of each sentence must hold (room the length limit adds)."""
        return self.lengths.sum(1)


def word_continuations(pieces: list[str]) -> torch.Tensor:
    """(V,) True for each piece (SentencePiece's, by id) that carries on the word before it: no word-start marker,
    and a letter or digit first (so not punctuation), or a byte of a character the vocabulary spells in bytes."""
    return torch.tensor([(not p.startswith("\u2581") and p[:1].isalnum()) or (p.startswith("<0x") and p.endswith(">"))
                         for p in pieces])


def _weights(phrases: int, device: torch.device) -> torch.Tensor:
    return 1 << torch.arange(phrases, device=device)  # each phrase's bit


def _bits(met: torch.Tensor, phrases: int) -> torch.Tensor:
    """(..., C) True where the phrase's bit is set in `met` (...)."""
    return (met.unsqueeze(-1) >> torch.arange(phrases, device=met.device)) & 1 == 1


@dataclass
class Progress:
    """How far each beam (or candidate) has met its sentence's phrases."""

    met: torch.Tensor  # (R,) bit c set: phrase c is whole in the hypothesis (empty slots are set from the start)
    matched: torch.Tensor  # (R, C) of each phrase not yet met, its longest start that the hypothesis ends with
    just_met: torch.Tensor  # (R,) bits of the phrases the last piece made whole: the next piece must not glue on

    @classmethod
    def start(cls, lengths: torch.Tensor) -> "Progress":
        """Before the first piece, for rows of phrase lengths `lengths` (R, C)."""
        met = (lengths.eq(0).long() * _weights(lengths.shape[1], lengths.device)).sum(1)
        return cls(met, torch.zeros_like(lengths), torch.zeros_like(met))

    def select(self, index: torch.Tensor) -> "Progress":
        return Progress(self.met[index], self.matched[index], self.just_met[index])

    def pieces_met(self, lengths: torch.Tensor) -> torch.Tensor:
        """(R,) constraint pieces in place (the phrases met, and the furthest start of one not yet met): the bank a
        beam belongs to."""
        whole = _bits(self.met, lengths.shape[1])
        return (whole.long() * lengths).sum(1) + self.matched.masked_fill(whole, 0).max(1).values

    def done(self, lengths: torch.Tensor) -> torch.Tensor:
        """(R,) every phrase whole: the hypothesis may end."""
        return _bits(self.met, lengths.shape[1]).all(1)

    def next_pieces(self, pieces: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(R, C) the piece that meets more of each phrase not yet met (the one after its start in place, its first
        if none is); -1 for a phrase met or empty."""
        following = pieces.gather(2, self.matched.clamp(max=pieces.shape[2] - 1).unsqueeze(2)).squeeze(2)
        return following.masked_fill(_bits(self.met, lengths.shape[1]) | lengths.eq(0), -1)

    def advance(self, token: torch.Tensor, pieces: torch.Tensor, lengths: torch.Tensor, borders: torch.Tensor,
                continues_word: torch.Tensor | None = None, twins: torch.Tensor | None = None) -> "Progress":
        """After each row takes `token` (R,); `pieces` (R, C, L), `lengths` (R, C), `borders` (R, C, L) and `twins`
        (R, C, C; None: no phrase given twice) are the rows' sentences'; `continues_word` (V,) the pieces that take
        back a phrase they follow (None: none does). Every phrase not yet met follows the hypothesis as
        Knuth-Morris-Pratt matching does: its start in place grows by the piece, or falls back to the longest start
        that the hypothesis still ends with. A phrase given n times must stand n times, as fairseq's and Sockeye's
        constraints count: an occurrence meets the first of its open twins, and the others start again after it."""
        met = self.met
        if continues_word is not None:  # glued onto a phrase just made whole: a longer word, not the phrase
            met = torch.where(continues_word[token], met & ~self.just_met, met)
        x, last = token.unsqueeze(1), pieces.shape[2] - 1
        at, matched = self.matched, torch.zeros_like(self.matched)
        settled = torch.zeros_like(at, dtype=torch.bool)
        for _ in range(pieces.shape[2] + 1):  # each turn shortens the start tried: at most L + 1 turns, no sync
            hit = ~settled & pieces.gather(2, at.clamp(max=last).unsqueeze(2)).squeeze(2).eq(x)
            matched = torch.where(hit, at + 1, matched)
            settled |= hit | at.eq(0)  # no start of it is left: nothing in place
            at = torch.where(settled, at, borders.gather(2, at.clamp(max=last).unsqueeze(2)).squeeze(2))
        open_ = ~_bits(met, lengths.shape[1]) & lengths.gt(0)
        whole = open_ & matched.eq(lengths)
        counted = whole if twins is None else whole & ~(twins & whole.unsqueeze(2)).any(1)  # no earlier twin whole
        just_met = (counted.long() * _weights(lengths.shape[1], lengths.device)).sum(1)
        return Progress(met | just_met, matched.masked_fill(~open_ | whole, 0), just_met)


def borders_of(ids: list[int], width: int) -> list[int]:
    """Knuth-Morris-Pratt's failure function, `width` long: entry j the length of the longest proper start of
    ids[:j] that ids[:j] also ends with (0 for j of 0 or 1, and past the phrase)."""
    out = [0] * max(width, 1)
    k = 0
    for j in range(1, len(ids)):
        while k and ids[j] != ids[k]:
            k = out[k]
        k += ids[j] == ids[k]
        if j + 1 < len(out):
            out[j + 1] = k
    return out


def striped(scores: torch.Tensor, banks: torch.Tensor, k: int, bank_count: int) -> torch.Tensor:
    """(n, k) the columns of `scores` (n, P) kept as beams: the best of each bank of `banks` (n, P), fullest bank
    first, then each bank's second best, ...; candidates of score -inf last."""
    order = scores.sort(dim=1, descending=True, stable=True).indices
    bank = banks.gather(1, order)
    one_hot = F.one_hot(bank, bank_count)
    rank = (one_hot.cumsum(1) * one_hot).sum(-1) - 1  # place within its bank, by score
    key = rank * bank_count + (bank_count - 1 - bank)
    key = key.masked_fill(~torch.isfinite(scores.gather(1, order)), torch.iinfo(key.dtype).max)
    return order.gather(1, key.topk(k, dim=1, largest=False, sorted=True).indices)


class ConstraintTracker:
    """The constraint side of one beam search: the beams' progress, the extra candidates, the striped choice."""

    def __init__(self, constraints: ConstraintBatch, beam_size: int):
        self.pieces, self.lengths, self.k = constraints.pieces, constraints.lengths, beam_size
        self.borders, self.continues_word = constraints.borders, constraints.continues_word
        self.twins = constraints.twins if constraints.twins.any() else None  # most requests repeat no phrase
        self.bank_count = int(constraints.total_pieces.max()) + 1
        # Per beam row, its sentence in `constraints` (the batch's numbering: rows leave as sentences finish).
        self.row_sentence = torch.arange(len(self.lengths), device=self.lengths.device).repeat_interleave(beam_size)
        self.progress = Progress.start(self.lengths[self.row_sentence])
        self.candidate_progress: Progress | None = None  # (n·P,) of the step's candidates
        self.candidate_sentence: torch.Tensor | None = None  # (n, P)

    def forbid_early_end(self, log_probs: torch.Tensor) -> torch.Tensor:
        """`log_probs` (R, V) with EOS -inf for the beams that have not met every phrase."""
        unfinished = ~self.progress.done(self.lengths[self.row_sentence])
        eos = log_probs[:, EOS_ID].masked_fill(unfinished, float("-inf"))
        return torch.cat([log_probs[:, :EOS_ID], eos.unsqueeze(1), log_probs[:, EOS_ID + 1:]], 1)

    def endings(self, top_scores: torch.Tensor, top_token: torch.Tensor, top_rows: torch.Tensor,
                scores: torch.Tensor, log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The candidates that may end (n, K: score, token, beam row; EOS among them ends). A sentence with phrases:
        every beam's EOS extension (-inf for a beam that has not met them all): beam search's own endings, the EOS
        among its K best candidates (`top_*`, n × 2K), would be crowded out by beams that met fewer phrases and so
        paid less. A sentence without: beam search's own, so that it is translated as with no constraints at all
        (a batch or a --tab-constraints file mixes the two)."""
        n, k = scores.shape
        rows = torch.arange(n * k, device=scores.device).view(n, k)
        held = self.lengths[self.row_sentence.view(n, k)[:, 0]].gt(0).any(1, keepdim=True)  # (n, 1)
        return (torch.where(held, scores + log_probs[:, EOS_ID].view(n, k), top_scores[:, :k]),
                torch.where(held, EOS_ID, top_token[:, :k]), torch.where(held, rows, top_rows[:, :k]))

    def candidates(self, alive: torch.Tensor, token: torch.Tensor, rows: torch.Tensor, scores: torch.Tensor,
                   log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Beam search's continuing candidates (n, 2K: score, token, beam row) and, for every beam, its best
        continuation and its constraint pieces (n, K·(1 + C) more; one already among them, or proposed twice, at
        -inf); each candidate's progress kept. The best continuation of each beam is Post & Vilar's third source:
        without it a beam that has met a phrase at a price, its own continuations outscored by those of beams that
        met less, could only end where it stood or take more constraint pieces (`Reviens !` for "come back." held
        to `Reviens` was never found; `Venez Reviens.` was)."""
        n, vocab = alive.shape[0], log_probs.shape[1]
        best = log_probs.index_fill(1, torch.tensor([EOS_ID], device=log_probs.device), float("-inf")).argmax(1)
        extra = torch.cat([best.unsqueeze(1), self.progress.next_pieces(self.pieces[self.row_sentence],
                                                                         self.lengths[self.row_sentence])], 1)
        extra_scores = scores.reshape(-1, 1) + log_probs.gather(1, extra.clamp(min=0))  # (n·K, 1 + C)
        extra_scores = extra_scores.masked_fill(extra.lt(0), float("-inf")).view(n, -1)
        extra_rows = torch.arange(len(extra), device=extra.device).repeat_interleave(extra.shape[1]).view(n, -1)
        extra = extra.clamp(min=0).view(n, -1)
        key, extra_key = rows * vocab + token, extra_rows * vocab + extra
        repeated = (extra_key.unsqueeze(2) == key.unsqueeze(1)).any(2)
        same = extra_key.unsqueeze(2) == extra_key.unsqueeze(1)
        repeated |= (same & torch.ones_like(same).tril(-1)).any(2)  # an earlier column proposes the same piece
        alive = torch.cat([alive, extra_scores.masked_fill(repeated, float("-inf"))], 1)
        token, rows = torch.cat([token, extra], 1), torch.cat([rows, extra_rows], 1)
        self.candidate_sentence = self.row_sentence[rows]
        sentence = self.candidate_sentence.reshape(-1)
        self.candidate_progress = self.progress.select(rows.reshape(-1)).advance(
            token.reshape(-1), self.pieces[sentence], self.lengths[sentence], self.borders[sentence],
            self.continues_word, None if self.twins is None else self.twins[sentence])
        return alive, token, rows

    def choose(self, alive: torch.Tensor, running: torch.Tensor) -> torch.Tensor:
        """(r, K) the columns of `alive` (n, P) the running sentences keep as beams, striped across banks."""
        columns = self._columns(running, torch.arange(alive.shape[1], device=alive.device).expand(len(running), -1))
        lengths = self.lengths[self.candidate_sentence[running].reshape(-1)]
        banks = self.candidate_progress.select(columns).pieces_met(lengths).view(len(running), -1)
        return striped(alive[running], banks, self.k, self.bank_count)

    def keep(self, running: torch.Tensor, keep: torch.Tensor) -> None:
        """The chosen candidates (`keep` (r, K) of the running sentences) become the next step's beams."""
        self.progress = self.candidate_progress.select(self._columns(running, keep))
        self.row_sentence = self.candidate_sentence[running].gather(1, keep).reshape(-1)

    def _columns(self, running: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """Flat candidate indices of `columns` (r, m) of the running sentences."""
        return (running.unsqueeze(1) * self.candidate_sentence.shape[1] + columns).reshape(-1)
