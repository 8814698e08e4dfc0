"""An ensemble decodes with the mean of its members' probabilities, through the same search as one model."""

import copy

import pytest
import torch

from nmt.config import DecodeConfig
from nmt.data.tokenizer import BOS_ID
from nmt.models.base import AttentionChoice
from nmt.models.ensemble import Ensemble
from nmt.search import search
from tests_helpers import make_model, random_sources


def members():
    torch.manual_seed(1)
    transformer = make_model("transformer").eval()
    torch.manual_seed(2)
    bahdanau = make_model("bahdanau").eval()
    with torch.no_grad():  # make_model seeds its own weights: give the second member other ones
        for p in bahdanau.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return transformer, bahdanau


@torch.no_grad()
def test_a_step_is_the_mean_of_the_members_probabilities():
    a, b = members()
    ensemble = Ensemble([a, b]).eval()
    src = random_sources()
    tokens = torch.full((src.shape[0],), BOS_ID)
    mixed, state, weights = ensemble.step(tokens, ensemble.encode(src), AttentionChoice())
    alone = [torch.softmax(m.step(tokens, m.encode(src), None)[0].float(), -1) for m in (a, b)]
    torch.testing.assert_close(mixed.exp(), (alone[0] + alone[1]) / 2, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(mixed.exp().sum(-1), torch.ones(src.shape[0]))
    assert weights.shape == src.shape  # the members' source attention, averaged
    assert {name.split("/")[0] for name in state} == {"0", "1"}


@torch.no_grad()
def test_teacher_forcing_gives_the_mixture_that_stepping_gives():
    ensemble = Ensemble(list(members())).eval()
    src = random_sources(seed=3)
    tgt_in = torch.cat([torch.full((src.shape[0], 1), BOS_ID), random_sources((4, 4, 4, 4), seed=4)[:, :4]], 1)
    forced = ensemble(src, tgt_in)  # (B, T, V) log-probabilities
    state = ensemble.encode(src)
    for t in range(tgt_in.shape[1]):
        stepped, state, _ = ensemble.step(tgt_in[:, t], state)
        torch.testing.assert_close(forced[:, t], stepped, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
def test_an_ensemble_of_one_model_twice_decodes_as_that_model(beam):
    # The cache of every member is reordered with the beams: a slip would show as other tokens than the model's own.
    model = members()[0]
    decode = DecodeConfig(beam_size=beam, max_len_a=1.0, max_len_b=6)
    src = random_sources((3, 7, 5, 1, 6))
    alone = search(model, src, decode, AttentionChoice(), n_best=min(beam, 3) if beam > 1 else 1)
    twice = search(Ensemble([model, copy.deepcopy(model)]).eval(), src, decode, AttentionChoice(),
                   n_best=min(beam, 3) if beam > 1 else 1)
    assert twice.tokens == alone.tokens
    torch.testing.assert_close(twice.scores, alone.scores, atol=1e-4, rtol=1e-5)
    for ours, theirs in zip(twice.attention, alone.attention):
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-4)


def test_an_ensemble_is_not_trained_and_needs_two_members():
    a, b = members()
    with pytest.raises(ValueError, match="two members or more"):
        Ensemble([a])
    src = random_sources()
    with pytest.raises(ValueError, match="train its members one by one"):
        Ensemble([a, b])(src, src, targets=src.flatten())


def test_an_ensemble_holds_the_target_positions_its_shortest_member_holds():
    transformer, bahdanau = members()
    short = make_model("transformer", max_positions=32)
    assert (transformer.max_target_positions, short.max_target_positions) == (1024, 32)
    assert bahdanau.max_target_positions is None  # a recurrent decoder reads any length
    assert Ensemble([transformer, bahdanau, short]).max_target_positions == 32
    assert Ensemble([bahdanau, make_model("luong")]).max_target_positions is None
