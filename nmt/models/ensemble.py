"""Several trained models that decode as one (fairseq's `--path a.pt:b.pt`, Marian's `--models`).

At every step each member reads the same source and the same output so far, and the ensemble's distribution is the
mean of the members' probabilities: log p(y) = logsumexp_i(log p_i(y)) - log n. It implements `encode` / `step` /
`forward` like any model, so search, scoring and serving need not know that it is several: its "logits" are
already log-probabilities (a log-softmax leaves them as they are; the search skips it).

Members must read and write the same pieces under the same ids (one SentencePiece model): nmt.translator checks.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nmt.models.base import AttentionChoice, EncoderDecoder, State


class Ensemble(EncoderDecoder):
    gives_log_probs = True  # the search need not normalize them again

    def __init__(self, members: list[EncoderDecoder]):
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs two members or more, not {len(members)}")
        self.members = nn.ModuleList(members)
        self.log_count = math.log(len(members))

    @property
    def has_attention(self) -> bool:  # type: ignore[override]
        return any(m.has_attention for m in self.members)

    @property
    def attention_layers_heads(self) -> tuple[int, int]:
        """What every member with source attention has (the page offers only those)."""
        shapes = [m.attention_layers_heads for m in self.members if m.has_attention]
        return (min(s[0] for s in shapes), min(s[1] for s in shapes)) if shapes else (0, 0)

    @property
    def max_target_positions(self) -> int | None:  # type: ignore[override]
        """The fewest of any member: each reads every step."""
        bounded = [m.max_target_positions for m in self.members if m.max_target_positions is not None]
        return min(bounded, default=None)

    def check_attention_choice(self, choice: AttentionChoice) -> None:
        for member in self.members:
            if member.has_attention:
                member.check_attention_choice(choice)

    def encode(self, src: torch.Tensor) -> State:
        # One flat dict, member i's tensors under "i/name": reorder_state reorders all of them with one rule.
        return {f"{i}/{name}": tensor for i, member in enumerate(self.members)
                for name, tensor in member.encode(src).items()}

    def step(self, prev_tokens: torch.Tensor, state: State, attention: AttentionChoice | None = None
             ) -> tuple[torch.Tensor, State, torch.Tensor | None]:
        """The mixture's log-probabilities (B, V) in fp32; the source attention is the mean over the members that
        have one (fairseq's choice)."""
        log_probs, new_state, weights = [], {}, []
        for i, member in enumerate(self.members):
            prefix = f"{i}/"
            own = {name[len(prefix):]: tensor for name, tensor in state.items() if name.startswith(prefix)}
            logits, own, weight = member.step(prev_tokens, own, attention if member.has_attention else None)
            log_probs.append(torch.log_softmax(logits.float(), dim=-1))
            new_state.update({prefix + name: tensor for name, tensor in own.items()})
            if weight is not None:
                weights.append(weight.float())
        return self._mix(log_probs), new_state, torch.stack(weights).mean(0) if weights else None

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, keep: torch.Tensor | None = None,
                targets: torch.Tensor | None = None, label_smoothing: float = 0.0) -> torch.Tensor:
        """Teacher forcing, for scoring: the mixture's log-probabilities at the `keep` positions. An ensemble is
        put together from trained models; it is not trained (no `targets`)."""
        if targets is not None:
            raise ValueError("an ensemble decodes and scores; train its members one by one")
        return self._mix([torch.log_softmax(m(src, tgt_in, keep=keep).float(), dim=-1) for m in self.members])

    def forward_flops(self, src_len: float, tgt_len: float) -> tuple[float, float]:
        per_member = [m.forward_flops(src_len, tgt_len) for m in self.members]
        return sum(f[0] for f in per_member), sum(f[1] for f in per_member)

    def _mix(self, log_probs: list[torch.Tensor]) -> torch.Tensor:
        # Pairwise logaddexp, in place: one pass over (B, V) per member, where stack + logsumexp took several
        # (on a CPU the vocabulary-wide passes cost as much as a small model's step).
        mixed = log_probs[0]
        for other in log_probs[1:]:
            mixed = torch.logaddexp(mixed, other, out=mixed)
        return mixed.sub_(self.log_count)
