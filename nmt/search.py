"""Greedy and beam search, written once for every architecture through `encode` / `step` / `reorder_state`.

Both are batched over sentences (and beams) as tensors, force EOS at each sentence's maximum length, and stop as
soon as every sentence is finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from nmt.config import DecodeConfig, check_constraints
from nmt.constrained_search import ConstraintBatch, ConstraintTracker
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from nmt.models.base import AttentionChoice, EncoderDecoder, reorder_state


@dataclass
class Hypotheses:
    tokens: list[list[int]]  # per sentence, without EOS: the best hypothesis
    scores: torch.Tensor  # (B,) its log-probability (beam: length-normalized)
    attention: list[torch.Tensor] | None  # per sentence (target length + 1 for EOS, source length)
    # Per sentence, the n best (tokens, score) pairs, best first (beam search with n_best: up to n; else the best).
    n_best: list[list[tuple[list[int], float]]] | None = None

    def ranked(self) -> list[list[tuple[list[int], float]]]:
        """Every sentence's hypotheses, best first: the n-best lists, or the single best with its score."""
        if self.n_best is not None:
            return self.n_best
        return [[(tokens, score)] for tokens, score in zip(self.tokens, self.scores.tolist())]


class SearchCancelled(Exception):
    """The caller's `cancelled` check said stop: nobody waits for this search's result any more."""


def check_cancelled(cancelled: Callable[[], bool] | None) -> None:
    if cancelled is not None and cancelled():
        raise SearchCancelled()


def max_lengths(src: torch.Tensor, a: float, b: int) -> torch.Tensor:
    return (src.ne(PAD_ID).sum(1).float() * a).long() + b


def length_limits(src: torch.Tensor, a: float, b: int, prefix: torch.Tensor | None) -> torch.Tensor:
    """Each sentence's most output pieces, EOS included: `max_lengths`, and always room for its prefix and EOS."""
    limit = max_lengths(src, a, b)
    return limit if prefix is None else torch.maximum(limit, prefix.ne(PAD_ID).sum(1) + 1)


def ban_repeats(log_probs: torch.Tensor, history: torch.Tensor, n: int) -> torch.Tensor:
    """`log_probs` (R, V) with -inf for every piece that would repeat an n-gram already in its row's `history`
    (R, t), the pieces generated so far (fairseq's and CTranslate2's no_repeat_ngram_size); n 0: unchanged."""
    steps = history.shape[1]
    if n <= 0 or steps < n:
        return log_probs
    windows = history.unfold(1, n, 1)  # (R, t - n + 1, n): every n-gram so far
    repeats = (windows[:, :, :-1] == history[:, steps - n + 1:].unsqueeze(1)).all(-1)  # its first n-1 = the suffix
    banned = torch.zeros_like(log_probs).scatter_add_(1, windows[:, :, -1], repeats.to(log_probs.dtype))
    return log_probs.masked_fill(banned > 0, float("-inf"))


def as_log_probs(model: EncoderDecoder, logits: torch.Tensor) -> torch.Tensor:
    """What `model.step` (or its forward) returned, as fp32 log-probabilities."""
    return logits.float() if model.gives_log_probs else torch.log_softmax(logits.float(), dim=-1)


def force_prefix(log_probs: torch.Tensor, forced: torch.Tensor | None, raw: torch.Tensor | None = None
                 ) -> torch.Tensor:
    """`log_probs` (R, V) where each row whose `forced` piece (R,) is not PAD may only take that piece, at the price
    the model (`raw`: before any ban, default `log_probs`) puts on it: a target prefix is followed, not chosen."""
    if forced is None:
        return log_probs
    raw = log_probs if raw is None else raw
    index = forced.clamp(min=0).unsqueeze(1)
    only = torch.full_like(log_probs, float("-inf")).scatter_(1, index, raw.gather(1, index))
    return torch.where(forced.ne(PAD_ID).unsqueeze(1), only, log_probs)


def prefix_column(prefix: torch.Tensor | None, rows: torch.Tensor, t: int) -> torch.Tensor | None:
    """The pieces `prefix` (B, P; PAD past each sentence's own) forces at step t on the rows of sentences `rows`;
    None once every prefix is behind."""
    if prefix is None or t >= prefix.shape[1]:
        return None
    return prefix[rows, t]


def step_log_probs(model: EncoderDecoder, tokens: torch.Tensor, state, attention: AttentionChoice | None,
                   force_eos: torch.Tensor, history: torch.Tensor, no_repeat: int, forced: torch.Tensor | None = None):
    """One step's log-probabilities, n-gram repeats of `history` banned (`no_repeat`), rows with a `forced` piece
    (a target prefix) held to it; rows at their length limit may only end, at the price the model puts on EOS (a
    free EOS would favour hypotheses that run into the limit)."""
    logits, state, weights = model.step(tokens, state, attention)
    raw = as_log_probs(model, logits)
    log_probs = force_prefix(ban_repeats(raw, history, no_repeat), forced, raw)
    if force_eos.any():
        only_eos = torch.full_like(log_probs, float("-inf"))
        only_eos[:, EOS_ID] = log_probs[:, EOS_ID]
        log_probs = torch.where(force_eos.unsqueeze(1), only_eos, log_probs)
    return log_probs, state, weights


def _default_compact_every(device: torch.device) -> int:
    """How many steps greedy search runs between host syncs. Each sync (which rows are still decoding) stalls an
    accelerator's queue, while finished rows decoding on cost it almost nothing at validation's batch sizes; on a CPU
    the sync is free and every row of compute counts, so finished rows leave the batch at once."""
    return 1 if device.type == "cpu" else 8


def arg_max(log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy search's choice: the most probable piece of each row, with its log-probability."""
    return log_probs.max(-1)


@dataclass
class Sampler:
    """Random sampling's choice (DecodeConfig.sampling_*): a piece drawn from the model's distribution, cut to the
    `top_k` most probable (0: all) and to the smallest set whose probability reaches `top_p`, its logits divided by
    `temperature`. The log-probability kept is the model's own, untempered and uncut."""

    top_k: int
    top_p: float
    temperature: float
    generator: torch.Generator

    @classmethod
    def from_config(cls, decode: DecodeConfig, device: torch.device) -> "Sampler":
        generator = torch.Generator(device=device).manual_seed(decode.sampling_seed)
        return cls(decode.sampling_topk, decode.sampling_topp, decode.sampling_temperature, generator)

    def __call__(self, log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = log_probs if self.temperature == 1.0 else self._tempered(log_probs)
        nucleus = self.top_p < 1.0
        if 0 < self.top_k < logits.shape[-1]:  # draw among k columns, not the whole vocabulary
            values, ids = logits.topk(self.top_k, dim=-1)
            tokens = self._draw(values, ids, logits.logsumexp(-1, keepdim=True) if nucleus else None)
        elif nucleus:
            tokens = self._nucleus(logits)
        else:
            tokens = self._draw(logits, None, None)
        return log_probs.gather(1, tokens.unsqueeze(1)).squeeze(1), tokens

    def _tempered(self, log_probs: torch.Tensor) -> torch.Tensor:
        """The logits over the temperature, each row shifted to its maximum first (softmax is the same): the most
        probable piece stays at 0, so that a temperature near 0 is the arg-max. Unshifted, log-probabilities over
        1e-40 overflowed float32 to -inf in every column, and softmax's NaN drew the vocabulary's last piece. A
        temperature below the dtype's smallest normal number (1e-308 rounds to 0 in float32: 0/0) divides as that
        number, which already sends every other piece to -inf or past exp's underflow."""
        temperature = max(self.temperature, torch.finfo(log_probs.dtype).tiny)
        return (log_probs - log_probs.amax(-1, keepdim=True)) / temperature

    def _draw(self, logits: torch.Tensor, ids: torch.Tensor | None, total: torch.Tensor | None) -> torch.Tensor:
        """One piece per row from softmax(logits), whose columns are vocabulary `ids` (None: all, in order). With
        `total`, the full distribution's log-normalizer, the columns are in descending order and are first cut to
        the nucleus: a piece stays while the mass before it is under top_p (the most probable always does)."""
        if total is not None:
            probs = (logits - total).exp()
            logits = logits.masked_fill(probs.cumsum(-1) - probs >= self.top_p, float("-inf"))
        # By the inverse of the cumulative distribution: one random number per row. torch.multinomial draws one
        # per vocabulary entry, which took 17 ms of a (100, 8,000) step on a 2-core CPU against 0.8 ms.
        cdf = logits.softmax(-1).cumsum(-1)
        uniform = torch.rand(len(cdf), 1, generator=self.generator, device=cdf.device) * cdf[:, -1:]
        choice = torch.searchsorted(cdf, uniform, right=True).squeeze(1).clamp(max=cdf.shape[-1] - 1)
        return choice if ids is None else ids.gather(1, choice.unsqueeze(1)).squeeze(1)

    def _nucleus(self, logits: torch.Tensor, head: int = 256) -> torch.Tensor:
        """Top-p over the whole vocabulary: each row's nucleus lies among its `head` most probable pieces when those
        hold top_p of its mass (the usual case); only the other rows sort the whole vocabulary (25 ms for
        (100, 8,000) on a 2-core CPU: it was most of a sampled step)."""
        total = logits.logsumexp(-1, keepdim=True)
        values, ids = logits.topk(min(head, logits.shape[-1]), dim=-1)
        enough = (values.logsumexp(-1) - total.squeeze(1)).exp() >= self.top_p
        tokens = torch.empty(len(logits), dtype=torch.long, device=logits.device)
        tokens[enough] = self._draw(values[enough], ids[enough], total[enough])
        rest = (~enough).nonzero().squeeze(1)  # a host sync
        if len(rest):
            ordered, order = logits[rest].sort(dim=-1, descending=True)
            tokens[rest] = self._draw(ordered, order, total[rest])
        return tokens


@torch.no_grad()
def greedy_search(model: EncoderDecoder, src: torch.Tensor, max_len_a: float, max_len_b: int,
                  attention_choice: AttentionChoice | None = None, compact_every: int | None = None,
                  cancelled: Callable[[], bool] | None = None,
                  pick: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] = arg_max,
                  no_repeat: int = 0, prefix: torch.Tensor | None = None) -> Hypotheses:
    """src (B, S) → one continuation, a piece at a time: the arg-max (or what `pick` draws: a Sampler), never
    repeating an n-gram of size `no_repeat` (0: off), starting with each sentence's `prefix` pieces (B, P; PAD
    past its own) when given. Finished rows write padding and leave the batch every `compact_every` steps (the
    only host sync of the loop); the result does not depend on it. `cancelled` is asked at every step: True raises
    SearchCancelled."""
    batch, device = src.shape[0], src.device
    compact_every = compact_every or _default_compact_every(device)
    limit = length_limits(src, max_len_a, max_len_b, prefix)
    steps = int(limit.max())
    state = model.encode(src)
    active = torch.arange(batch, device=device)  # original index of each row still in the batch
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # ...which has already ended
    tokens = torch.full((batch,), BOS_ID, dtype=torch.long, device=device)
    scores = torch.zeros(batch, device=device)
    output = torch.full((batch, steps), PAD_ID, dtype=torch.long, device=device)
    need_attention = attention_choice is not None
    attention = torch.zeros(batch, steps, src.shape[1], device=device) if need_attention else None
    for t in range(steps):
        check_cancelled(cancelled)
        logits, state, weights = model.step(tokens, state, attention_choice)
        log_probs = raw = as_log_probs(model, logits)
        if no_repeat:
            log_probs = ban_repeats(log_probs, output[active, :t], no_repeat)
        log_probs = force_prefix(log_probs, prefix_column(prefix, active, t), raw)
        best, tokens = pick(log_probs)
        # Rows at their limit may only end, at the price the model puts on EOS: chosen after the arg-max, O(B)
        # and no test of whether any row is there (a host sync).
        at_limit = t + 1 >= limit[active]
        best, tokens = best.where(~at_limit, log_probs[:, EOS_ID]), tokens.masked_fill(at_limit, EOS_ID)
        scores[active] += best.masked_fill(done, 0.0)
        output[active, t] = tokens.masked_fill(done, PAD_ID)
        if need_attention:
            attention[active, t] = weights.float().masked_fill(done.unsqueeze(1), 0.0)
        done = done | tokens.eq(EOS_ID)
        if (t + 1) % compact_every == 0 or t + 1 == steps:
            running = (~done).nonzero().squeeze(1)  # the host sync
            if len(running) == 0:
                break
            if len(running) < len(active):
                active, tokens, done = active[running], tokens[running], done[running]
                state = reorder_state(state, running)
    result = [_strip(row) for row in output.tolist()]
    attn = None if attention is None else [attention[i, :len(result[i]) + 1].cpu() for i in range(batch)]
    return Hypotheses(result, scores, attn)


def _strip(row: list[int]) -> list[int]:
    return row[:row.index(EOS_ID)] if EOS_ID in row else [t for t in row if t != PAD_ID]


@dataclass(frozen=True)
class LengthNormalization:
    """How ended hypotheses are compared: score / penalty(|Y|).

    `wu`: Wu et al. (2016), ((5 + |Y|) / 6) ** alpha; `fairseq`: |Y| ** alpha (alpha 1 = the mean log-probability).
    `patient`: a sentence stays open while a live beam, even at no further cost, could still beat its best ended
    hypothesis once normalized at the length limit; otherwise it closes when beam_size hypotheses have ended.
    """

    alpha: float
    kind: str
    patient: bool

    @classmethod
    def from_config(cls, decode: DecodeConfig) -> "LengthNormalization":
        return cls(decode.length_penalty, decode.length_normalization, decode.patient_stop)

    def penalty(self, length: torch.Tensor | int) -> torch.Tensor | float:
        length = length.float() if isinstance(length, torch.Tensor) else float(length)
        return ((5.0 + length) / 6.0) ** self.alpha if self.kind == "wu" else length ** self.alpha


class EndedHypotheses:
    """The `n` best ended hypotheses of every sentence (indexed by original sentence id), best first; empty slots
    score -inf."""

    def __init__(self, batch: int, n: int, steps: int, source_len: int, need_attention: bool, device: torch.device):
        self.scores = torch.full((batch, n), float("-inf"), device=device)
        self.tokens = torch.full((batch, n, steps), PAD_ID, dtype=torch.long, device=device)
        self.attention = torch.zeros(batch, n, steps, source_len, device=device) if need_attention else None

    def worst_kept(self, sent_ids: torch.Tensor) -> torch.Tensor:
        """The score a new ended hypothesis must beat to be kept (-inf while a slot is free)."""
        return self.scores[sent_ids, -1]

    def update(self, sent_ids, top_scores, top_token, top_rows, history, attn_history, t: int, k: int,
               norm: LengthNormalization) -> torch.Tensor:
        """Set aside EOS candidates among each sentence's top K; return how many ended per running sentence."""
        ended = top_token.eq(EOS_ID) & torch.isfinite(top_scores)
        ended[:, k:] = False
        normalized = (top_scores / norm.penalty(torch.tensor(t + 1, device=top_scores.device))
                      ).masked_fill(~ended, float("-inf"))
        n = self.scores.shape[1]
        # The n best of (kept, candidates), an earlier hypothesis ahead of an equal newcomer: argmax returns the
        # first maximum (and costs less than the stable sort that ranks n > 1).
        merged = torch.cat([self.scores[sent_ids], normalized], 1)
        if n == 1:
            order = merged.argmax(1, keepdim=True)
        else:
            order = merged.sort(dim=1, descending=True, stable=True).indices[:, :n]
        changed = order.ge(n).any(1).nonzero().squeeze(1)
        if len(changed):
            ids, order = sent_ids[changed], order[changed]
            is_new = order.ge(n)
            new_rows = top_rows[changed].gather(1, (order - n).clamp(min=0))  # (c, n) the beam rows that ended
            old = order.clamp(max=n - 1).unsqueeze(-1)
            new_tokens = history[new_rows]
            new_tokens[:, :, t] = EOS_ID
            old_tokens = self.tokens[ids].gather(1, old.expand(-1, -1, new_tokens.shape[-1]))
            self.tokens[ids] = torch.where(is_new.unsqueeze(-1), new_tokens, old_tokens)
            self.scores[ids] = merged[changed].gather(1, order)
            if self.attention is not None:
                kept = self.attention[ids]
                old_attention = kept.gather(1, old.unsqueeze(-1).expand(-1, -1, *kept.shape[2:]))
                new_attention = torch.zeros_like(old_attention)
                new_attention[:, :, :t + 1] = attn_history[new_rows]
                self.attention[ids] = torch.where(is_new[..., None, None], new_attention, old_attention)
        return ended.sum(1)

    def hypotheses(self) -> Hypotheses:
        ranked = [[(_strip(row), score) for row, score in zip(rows, scores) if score > float("-inf")]
                  for rows, scores in zip(self.tokens.tolist(), self.scores.tolist())]
        best = [hyps[0][0] if hyps else [] for hyps in ranked]
        attention = None
        if self.attention is not None:
            attention = [self.attention[i, 0, :len(tokens) + 1].cpu() for i, tokens in enumerate(best)]
        return Hypotheses(best, self.scores[:, 0], attention, ranked if self.scores.shape[1] > 1 else None)


@torch.no_grad()
def beam_search(model: EncoderDecoder, src: torch.Tensor, beam_size: int, norm: LengthNormalization,
                max_len_a: float, max_len_b: int, attention_choice: AttentionChoice | None = None,
                n_best: int = 1, cancelled: Callable[[], bool] | None = None, no_repeat: int = 0,
                prefix: torch.Tensor | None = None, constraints: ConstraintBatch | None = None) -> Hypotheses:
    """Batched beam search over (sentences × beams); a sentence is done once `beam_size` hypotheses have ended.
    With `n_best` > 1 (at most `beam_size`) the result also ranks each sentence's n best ended hypotheses;
    `cancelled` is asked at every step: True raises SearchCancelled; `no_repeat` n bans repeated n-grams; every
    hypothesis of a sentence starts with its `prefix` pieces (B, P; PAD past its own), one beam until they end;
    with `constraints`, every hypothesis holds its sentence's phrases (nmt/constrained_search.py; the length limit
    grows by their pieces), and a sentence none of whose hypotheses met them all within it has none.

    Each step keeps the 2K best extensions: ended ones (EOS among the top K) are scored with the length penalty
    and set aside; the K best that continue become the new beams. Done sentences leave the batch (fairseq's rule).
    """
    batch, k, device = src.shape[0], beam_size, src.device
    if not 1 <= n_best <= k:
        raise ValueError(f"n_best must be between 1 and the beam size {k}, not {n_best}")
    need_attention = attention_choice is not None
    limit = length_limits(src, max_len_a, max_len_b, prefix)
    tracker = None
    if constraints is not None:
        limit, tracker = limit + constraints.total_pieces, ConstraintTracker(constraints, k)
    steps = int(limit.max())
    state = reorder_state(model.encode(src), torch.arange(batch, device=device).repeat_interleave(k))
    # Per running sentence (n of them) or per beam row (n·K), shrinking as sentences finish.
    sent_ids = torch.arange(batch, device=device)
    row_limit = limit.repeat_interleave(k)
    tokens = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    num_ended = torch.zeros(batch, dtype=torch.long, device=device)
    history = torch.full((batch * k, steps), PAD_ID, dtype=torch.long, device=device)
    attn_history = src.new_zeros(batch * k, 0, src.shape[1], dtype=torch.float) if need_attention else None
    ended = EndedHypotheses(batch, n_best, steps, src.shape[1], need_attention, device)
    for t in range(steps):
        check_cancelled(cancelled)
        n = len(sent_ids)
        forced = prefix_column(prefix, sent_ids, t)
        log_probs, state, weights = step_log_probs(model, tokens, state, attention_choice, t + 1 >= row_limit,
                                                   history[:, :t], no_repeat,
                                                   None if forced is None else forced.repeat_interleave(k))
        if tracker is not None:
            log_probs = tracker.forbid_early_end(log_probs)
        vocab = log_probs.shape[-1]
        top_scores, top_index = (scores.unsqueeze(-1) + log_probs.view(n, k, vocab)).view(n, -1).topk(2 * k, dim=1)
        top_token = top_index % vocab
        top_rows = torch.arange(n, device=device).unsqueeze(1) * k + top_index // vocab  # (n, 2K) rows extended
        if need_attention:
            attn_history = torch.cat([attn_history, weights.float().unsqueeze(1)], 1)
        # Constrained, every beam that holds its phrases may end, however many beams that have not outscore it.
        endings = (top_scores, top_token, top_rows) if tracker is None else \
            tracker.endings(top_scores, top_token, top_rows, scores, log_probs)
        num_ended += ended.update(sent_ids, *endings, history, attn_history, t, k, norm)
        alive = top_scores.masked_fill(top_token.eq(EOS_ID), float("-inf"))
        if tracker is not None:
            alive, top_token, top_rows = tracker.candidates(alive, top_token, top_rows, scores, log_probs)
        open_ = num_ended < k
        if norm.patient:  # log-probabilities only fall: the best a live beam can reach is its score at the limit
            best_live = alive.max(1).values / norm.penalty(limit[sent_ids])
            open_ = open_ | (best_live > ended.worst_kept(sent_ids))
        running = (open_ & torch.isfinite(alive).any(1)).nonzero().squeeze(1)
        if len(running) == 0:
            break
        # The K best continuing candidates of each running sentence become its beams (striped over constraint banks).
        if tracker is None:
            scores, keep = alive[running].topk(k, dim=1)
        else:
            keep = tracker.choose(alive, running)
            scores = alive[running].gather(1, keep)
            tracker.keep(running, keep)
        rows = top_rows[running].gather(1, keep).view(-1)
        tokens = top_token[running].gather(1, keep).view(-1)
        sent_ids, num_ended = sent_ids[running], num_ended[running]
        history, row_limit = history[rows], row_limit[rows]
        history[:, t] = tokens
        state = reorder_state(state, rows)
        if need_attention:
            attn_history = attn_history[rows]
    return ended.hypotheses()


def search(model: EncoderDecoder, src: torch.Tensor, decode: DecodeConfig,
           attention_choice: AttentionChoice | None = None, n_best: int = 1,
           cancelled: Callable[[], bool] | None = None, prefix: torch.Tensor | None = None,
           constraints: ConstraintBatch | None = None) -> Hypotheses:
    """Decode `src` exactly as `decode` says: greedy at beam 1, else beam search with its length normalization
    (ranking `n_best` hypotheses per sentence, at most the beam size); with sampling, `n_best` draws per sentence
    ranked by their normalized score. With `prefix` (B, P), each output starts with its sentence's pieces (PAD
    past them; a row of PAD: none), scored as the model scores them (CTranslate2's target_prefix). With
    `constraints` (beam search only), every hypothesis holds its sentence's phrases.

    The one entry point for every caller (translation, validation, sweeps): the settings travel whole, so there is
    no second set of defaults below the config.
    """
    if constraints is not None:
        check_constraints(decode)
    if decode.samples:
        return _sample(model, src, decode, attention_choice, n_best, cancelled, prefix)
    if decode.beam_size == 1:
        if n_best != 1:
            raise ValueError(f"greedy search finds one hypothesis, not {n_best}: n_best needs beam search")
        return greedy_search(model, src, decode.max_len_a, decode.max_len_b, attention_choice, cancelled=cancelled,
                             no_repeat=decode.no_repeat_ngram_size, prefix=prefix)
    return beam_search(model, src, decode.beam_size, LengthNormalization.from_config(decode), decode.max_len_a,
                       decode.max_len_b, attention_choice, n_best, cancelled, decode.no_repeat_ngram_size, prefix,
                       constraints)


def _sample(model: EncoderDecoder, src: torch.Tensor, decode: DecodeConfig, attention_choice: AttentionChoice | None,
            n_best: int, cancelled: Callable[[], bool] | None, prefix: torch.Tensor | None) -> Hypotheses:
    """`n_best` draws per sentence (each sentence's rows side by side), best first by normalized score; the
    result's scores are log-probabilities, as greedy search's are."""
    if decode.beam_size != 1:
        raise ValueError(f"sampling draws one continuation at a time: beam_size must be 1, not {decode.beam_size}")
    rows = src.repeat_interleave(n_best, dim=0) if n_best > 1 else src
    if prefix is not None and n_best > 1:
        prefix = prefix.repeat_interleave(n_best, dim=0)
    drawn = greedy_search(model, rows, decode.max_len_a, decode.max_len_b, attention_choice, cancelled=cancelled,
                          pick=Sampler.from_config(decode, src.device), no_repeat=decode.no_repeat_ngram_size,
                          prefix=prefix)
    if n_best == 1:
        return drawn
    norm, scores = LengthNormalization.from_config(decode), drawn.scores.tolist()
    ranked, best = [], []
    for i in range(src.shape[0]):
        draws = range(i * n_best, (i + 1) * n_best)
        order = sorted(draws, key=lambda r: -scores[r] / norm.penalty(len(drawn.tokens[r]) + 1))
        ranked.append([(drawn.tokens[r], scores[r]) for r in order])
        best.append(order[0])
    attention = None if drawn.attention is None else [drawn.attention[r] for r in best]
    return Hypotheses([drawn.tokens[r] for r in best], drawn.scores[best], attention, ranked)
