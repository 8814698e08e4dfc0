"""Greedy and beam search, written once for every architecture through `encode` / `step` / `reorder_state`.

Both are batched over sentences (and beams) as tensors, force EOS at each sentence's maximum length, and stop as
soon as every sentence is finished.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from nmt.models.base import EncoderDecoder, reorder_state


@dataclass
class Hypotheses:
    tokens: list[list[int]]  # per sentence, without EOS
    scores: torch.Tensor  # (B,) log-probability (beam: length-normalized)
    attention: list[torch.Tensor] | None  # per sentence (target length + 1 for EOS, source length)


def max_lengths(src: torch.Tensor, a: float, b: int) -> torch.Tensor:
    return (src.ne(PAD_ID).sum(1).float() * a).long() + b


def _log_probs(model: EncoderDecoder, tokens: torch.Tensor, state, need_attention: bool, force_eos: torch.Tensor):
    logits, state = model.step(tokens, state, need_attention)
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    if force_eos.any():  # sentences at their length limit may only end
        only_eos = torch.full_like(log_probs, float("-inf"))
        only_eos[:, EOS_ID] = 0.0
        log_probs = torch.where(force_eos.unsqueeze(1), only_eos, log_probs)
    return log_probs, state


@torch.no_grad()
def greedy_search(model: EncoderDecoder, src: torch.Tensor, max_len_a: float, max_len_b: int,
                  need_attention: bool = False) -> Hypotheses:
    """src (B, S) → the arg-max continuation at every step."""
    batch = src.shape[0]
    limit = max_lengths(src, max_len_a, max_len_b)
    state = model.encode(src)
    tokens = torch.full((batch,), BOS_ID, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    scores = torch.zeros(batch, device=src.device)
    outputs, attention = [], []
    for t in range(int(limit.max())):
        log_probs, state = _log_probs(model, tokens, state, need_attention, t + 1 >= limit)
        best, tokens = log_probs.max(-1)
        tokens = tokens.masked_fill(finished, PAD_ID)
        scores += best.masked_fill(finished, 0.0)
        outputs.append(tokens)
        if need_attention:
            attention.append(state["attention"].float())
        finished |= tokens.eq(EOS_ID)
        if finished.all():
            break
    history = torch.stack(outputs, 1).tolist()
    result = [_strip(row) for row in history]
    attn = None
    if need_attention:
        stacked = torch.stack(attention, 1)  # (B, T, S)
        attn = [stacked[i, :len(result[i]) + 1].cpu() for i in range(batch)]
    return Hypotheses(result, scores, attn)


def _strip(row: list[int]) -> list[int]:
    return row[:row.index(EOS_ID)] if EOS_ID in row else [t for t in row if t != PAD_ID]


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """Wu et al. (2016): ((5 + |Y|) / 6) ** alpha."""
    return ((5.0 + length.float()) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model: EncoderDecoder, src: torch.Tensor, beam_size: int, alpha: float, max_len_a: float,
                max_len_b: int, need_attention: bool = False) -> Hypotheses:
    """Batched beam search over (sentences × beams); a sentence is done once `beam_size` hypotheses have ended.

    Each step keeps the 2K best extensions: ended ones (EOS among the top K) are scored with the length penalty
    and set aside; the K best that continue become the new beams.
    """
    batch, k, device = src.shape[0], beam_size, src.device
    limit = max_lengths(src, max_len_a, max_len_b)
    state = reorder_state(model.encode(src), torch.arange(batch, device=device).repeat_interleave(k))
    beam_limit = limit.repeat_interleave(k)
    tokens = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    steps = int(limit.max())
    history = torch.full((batch * k, steps), PAD_ID, dtype=torch.long, device=device)
    attn_history = None
    best_scores = torch.full((batch,), float("-inf"), device=device)
    best_tokens = torch.full((batch, steps), PAD_ID, dtype=torch.long, device=device)
    best_attn = None
    num_ended = torch.zeros(batch, dtype=torch.long, device=device)
    offsets = (torch.arange(batch, device=device) * k).unsqueeze(1)
    for t in range(steps):
        log_probs, state = _log_probs(model, tokens, state, need_attention, t + 1 >= beam_limit)
        vocab = log_probs.shape[-1]
        candidates = (scores.unsqueeze(-1) + log_probs.view(batch, k, vocab)).view(batch, -1)
        top_scores, top_index = candidates.topk(2 * k, dim=1)  # (B, 2K)
        top_beam, top_token = top_index // vocab, top_index % vocab
        source_rows = (offsets + top_beam).view(-1)  # rows of the flat (B·K) state each candidate extends
        if need_attention:
            step_attn = state["attention"].float().unsqueeze(1)
            attn_history = step_attn if attn_history is None else torch.cat([attn_history, step_attn], 1)
            if best_attn is None:
                best_attn = attn_history.new_zeros(batch, steps, attn_history.shape[-1])
        # Ended hypotheses: EOS among the first K candidates of a sentence that is not done yet.
        done = num_ended >= k
        ended = top_token.eq(EOS_ID) & torch.isfinite(top_scores)
        ended[:, k:] = False
        ended &= ~done.unsqueeze(1)
        normalized = (top_scores / length_penalty(torch.tensor(t + 1, device=device), alpha)).masked_fill(
            ~ended, float("-inf"))
        cand_best, cand_pos = normalized.max(1)
        improved = cand_best > best_scores
        if improved.any():
            rows = source_rows.view(batch, 2 * k).gather(1, cand_pos.unsqueeze(1)).squeeze(1)
            new_tokens = history[rows].clone()
            new_tokens[:, t] = EOS_ID
            best_tokens = torch.where(improved.unsqueeze(1), new_tokens, best_tokens)
            best_scores = torch.where(improved, cand_best, best_scores)
            if need_attention:
                padded = torch.zeros_like(best_attn)
                padded[:, :t + 1] = attn_history[rows]
                best_attn = torch.where(improved.view(-1, 1, 1), padded, best_attn)
        num_ended += ended.sum(1)
        if bool((num_ended >= k).all()):
            break
        # The K best continuing candidates become the beams.
        alive_scores = top_scores.masked_fill(top_token.eq(EOS_ID), float("-inf"))
        scores, keep = alive_scores.topk(k, dim=1)
        rows = source_rows.view(batch, 2 * k).gather(1, keep).view(-1)
        tokens = top_token.gather(1, keep).view(-1)
        history = history[rows]
        history[:, t] = tokens
        state = reorder_state(state, rows)
        if need_attention:
            attn_history = attn_history[rows]
    result = [_strip(row) for row in best_tokens.tolist()]
    attn = None if best_attn is None else [best_attn[i, :len(result[i]) + 1].cpu() for i in range(batch)]
    return Hypotheses(result, best_scores, attn)
