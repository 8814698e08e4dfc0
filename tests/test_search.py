"""Greedy and beam search over the shared decoding interface."""

import dataclasses
import math

import pytest
import sacrebleu
import torch

from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from nmt.metrics import corpus_scores
from nmt.models.base import AttentionChoice, EncoderDecoder
from nmt.search import LengthNormalization, beam_search, greedy_search
from tests_helpers import make_model, random_sources

WU = LengthNormalization(0.6, "wu", False)
NONE = LengthNormalization(0.0, "wu", False)

A, B = 4, 5


class MarkovToy(EncoderDecoder):
    """Next-token probabilities depend only on the previous token: the best hypothesis is known by hand.

    P(A|BOS)=.5 P(B|BOS)=.4 P(EOS|BOS)=.1; P(A|A)=.4 P(B|A)=.3 P(EOS|A)=.3; P(EOS|B)=.9 P(A|B)=.1.
    Greedy follows A, A, A, ... while the most probable sentence is "B EOS" (p = .36).
    """

    def __init__(self):
        super().__init__()
        table = torch.full((6, 6), 1e-9)
        table[BOS_ID, A], table[BOS_ID, B], table[BOS_ID, EOS_ID] = .5, .4, .1
        table[A, A], table[A, B], table[A, EOS_ID] = .4, .3, .3
        table[B, EOS_ID], table[B, A] = .9, .1
        table[EOS_ID, EOS_ID] = table[PAD_ID, EOS_ID] = 1.0
        self.register_buffer("log_table", table.log())

    def encode(self, src):
        return {"src_mask": src.eq(PAD_ID)}

    def step(self, prev_tokens, state, attention=None):
        return self.log_table[prev_tokens], state, None


def test_beam_finds_known_best_hypothesis_greedy_misses():
    model, src = MarkovToy(), torch.tensor([[7, EOS_ID], [7, EOS_ID]])
    greedy = greedy_search(model, src, max_len_a=0.0, max_len_b=4)
    assert greedy.tokens[0] == [A, A, A]  # forced to end at the length limit
    beam = beam_search(model, src, beam_size=2, norm=NONE, max_len_a=0.0, max_len_b=4)
    assert beam.tokens == [[B], [B]]
    assert beam.scores[0].item() == pytest.approx(math.log(0.36), abs=1e-5)


def test_forced_eos_at_the_length_limit_costs_its_probability():
    """At the limit a hypothesis may only end, at the price the model puts on EOS: "A EOS" (.5 × .3 = .15) must not
    beat "B EOS" (.4 × .9 = .36) by getting its EOS for free."""
    model, src = MarkovToy(), torch.tensor([[7, EOS_ID]])
    beam = beam_search(model, src, beam_size=2, norm=NONE, max_len_a=0.0, max_len_b=2)
    assert beam.tokens == [[B]]
    assert beam.scores[0].item() == pytest.approx(math.log(0.36), abs=1e-5)
    greedy = greedy_search(model, src, max_len_a=0.0, max_len_b=2)
    assert greedy.tokens == [[A]] and greedy.scores[0].item() == pytest.approx(math.log(0.15), abs=1e-5)


@pytest.mark.parametrize("arch", ["transformer", "bahdanau", "luong", "seq2seq"])
def test_beam_one_equals_greedy(arch):
    model, src = make_model(arch).eval(), random_sources()
    greedy = greedy_search(model, src, 1.5, 5)
    beam = beam_search(model, src, beam_size=1, norm=WU, max_len_a=1.5, max_len_b=5)
    assert beam.tokens == greedy.tokens


@pytest.mark.parametrize("arch", ["transformer", "bahdanau", "luong"])
def test_cached_decoding_equals_uncached(arch):
    """Greedy through `step` (KV cache / carried RNN state) == re-running the full prefix at every step."""
    model, src = make_model(arch).eval(), random_sources()
    cached = greedy_search(model, src, 1.5, 5).tokens
    prefix = torch.full((src.shape[0], 1), BOS_ID)
    with torch.no_grad():
        for _ in range(int(src.ne(PAD_ID).sum(1).max() * 1.5) + 5):
            next_tokens = model(src, prefix)[:, -1].argmax(-1, keepdim=True)
            prefix = torch.cat([prefix, next_tokens], 1)
    for i, tokens in enumerate(cached):
        assert tokens == prefix[i, 1:len(tokens) + 1].tolist()


def test_beam_search_batched_equals_one_by_one():
    model, src = make_model("transformer").eval(), random_sources()
    together = beam_search(model, src, 4, WU, 1.5, 5).tokens
    alone = [beam_search(model, src[i:i + 1, :int(src[i].ne(PAD_ID).sum())], 4, WU, 1.5, 5).tokens[0]
             for i in range(src.shape[0])]
    assert together == alone


def test_beam_attention_rows_match_output_length():
    model, src = make_model("bahdanau").eval(), random_sources()
    result = beam_search(model, src, 3, WU, 1.5, 5, attention_choice=AttentionChoice())
    for tokens, attention in zip(result.tokens, result.attention):
        assert attention.shape[0] == len(tokens) + 1
        torch.testing.assert_close(attention.sum(-1), torch.ones(len(tokens) + 1))


def test_multi_reference_bleu_matches_sacrebleu():
    hyps = ["je suis chez moi .", "il est calme .", "va !"]
    refs = [["je suis à la maison .", "je suis chez moi ."], ["il est calme ."], ["va !", "bouge !", "pars !"]]
    ours = corpus_scores(hyps, refs)
    streams = [["je suis à la maison .", "il est calme .", "va !"], ["je suis chez moi .", None, "bouge !"],
               [None, None, "pars !"]]
    assert ours["bleu"] == round(sacrebleu.corpus_bleu(hyps, streams).score, 2)
    assert corpus_scores(hyps, refs, with_ter=True)["ter"] == round(sacrebleu.corpus_ter(hyps, streams).score, 2)
    assert ours["bleu"] > corpus_scores(hyps, [[r[0]] for r in refs])["bleu"]
    assert "nrefs:var" in ours["bleu_signature"]


@pytest.mark.parametrize("kind", ["wu", "fairseq"])
@pytest.mark.parametrize("patient", [False, True])
def test_normalizations_keep_beam_one_equal_to_greedy(kind, patient):

    model, src = make_model("transformer").eval(), random_sources()
    norm = LengthNormalization(1.0, kind, patient)
    assert beam_search(model, src, 1, norm, 1.5, 5).tokens == greedy_search(model, src, 1.5, 5).tokens


class PatienceToy(MarkovToy):
    """P(EOS|BOS)=.5 P(A|BOS)=.5; P(A|A)=.95 P(EOS|A)=.05: ending at once is likely, but a long "A A A ..."
    has the best mean log-probability. Beam 2 sees two ended hypotheses after two steps."""

    def __init__(self):
        super().__init__()
        table = torch.full((6, 6), 1e-9)
        table[BOS_ID, EOS_ID], table[BOS_ID, A] = .5, .5
        table[A, A], table[A, EOS_ID] = .95, .05
        table[EOS_ID, EOS_ID] = table[PAD_ID, EOS_ID] = table[B, EOS_ID] = 1.0
        self.log_table = table.log()


def test_patient_stop_keeps_searching_while_a_live_beam_can_still_win():

    model, src = PatienceToy(), torch.tensor([[7, EOS_ID]])
    hasty = beam_search(model, src, 2, LengthNormalization(1.0, "fairseq", False), 0.0, 10)
    patient = beam_search(model, src, 2, LengthNormalization(1.0, "fairseq", True), 0.0, 10)
    assert hasty.tokens == [[]]  # "EOS" at once: mean log-prob log(.5)
    assert patient.tokens[0] == [A] * 9  # the limit: 9 A's and the (priced) forced EOS
    expected = (math.log(.5) + 8 * math.log(.95) + math.log(.05)) / 10
    assert patient.scores[0].item() == pytest.approx(expected, abs=1e-5) and expected > math.log(.5)


class CountdownToy(EncoderDecoder):
    """Emits A, B, A, B, ... and then EOS after (its first source token mod 7) tokens, unless the limit comes first:
    rows of one batch end at different steps, some before their limit. The state carries each row's count, so a
    row that leaves the batch or is reordered keeps its own."""

    def encode(self, src):
        return {"left": src[:, 0] % 7, "made": torch.zeros(len(src), dtype=torch.long)}

    def step(self, prev_tokens, state, attention=None):
        made, left = state["made"], state["left"]
        logits = torch.full((len(prev_tokens), 6), -5.0)
        nxt = torch.where(made >= left, EOS_ID, torch.where(made % 2 == 0, A, B))
        logits.scatter_(1, nxt.unsqueeze(1), 0.0)
        return logits, {"left": left, "made": made + 1}, None


@pytest.mark.parametrize("compact_every", [2, 3, 8, 100])
def test_greedy_result_does_not_depend_on_how_often_finished_rows_leave(compact_every):
    model, src = CountdownToy(), random_sources(lengths=(3, 9, 5, 1, 7, 2), seed=1)
    every_step = greedy_search(model, src, 1.0, 0, compact_every=1)  # the limit: source length + 1 with EOS
    lengths = [min(int(row[0]) % 7, int(row.ne(PAD_ID).sum()) - 1) for row in src]
    assert every_step.tokens == [[A, B] * (n // 2) + [A] * (n % 2) for n in lengths]
    assert len(set(lengths)) >= 4 and any(n < int(row.ne(PAD_ID).sum()) - 1 for n, row in zip(lengths, src))
    deferred = greedy_search(model, src, 1.0, 0, compact_every=compact_every)
    assert deferred.tokens == every_step.tokens
    torch.testing.assert_close(deferred.scores, every_step.scores, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ["transformer", "bahdanau", "luong", "seq2seq"])
def test_greedy_compaction_cadence_keeps_tokens_scores_and_attention(arch):
    # Untrained models run to their limits, which differ per sentence: rows leave the batch at different steps.
    model, src = make_model(arch).eval().double(), random_sources(lengths=(3, 7, 5, 1, 9, 4), seed=2)
    choice = AttentionChoice() if model.has_attention else None
    every_step = greedy_search(model, src, 1.5, 5, choice, compact_every=1)
    deferred = greedy_search(model, src, 1.5, 5, choice, compact_every=4)
    assert len({len(t) for t in every_step.tokens}) > 3
    assert deferred.tokens == every_step.tokens
    torch.testing.assert_close(deferred.scores, every_step.scores)
    if choice is not None:
        for a, b in zip(deferred.attention, every_step.attention):
            torch.testing.assert_close(a, b)


def test_n_best_ranks_the_hypotheses_beam_search_ended():
    """MarkovToy at beam 2: "B EOS" (.36) ends at step 2, "A B EOS" (.5 × .3 × .9 = .135) at step 3, which fills the
    beam; "A EOS" (.15) never ends in it (its EOS is third of four at step 2), so it is not in the list."""
    model, src = MarkovToy(), torch.tensor([[7, EOS_ID]])
    result = beam_search(model, src, beam_size=2, norm=NONE, max_len_a=0.0, max_len_b=5, n_best=2)
    assert [tokens for tokens, _ in result.n_best[0]] == [[B], [A, B]]
    assert [score for _, score in result.n_best[0]] == pytest.approx([math.log(.36), math.log(.135)], abs=1e-5)
    assert result.tokens == [[B]] and result.ranked() == result.n_best


def _forced_log_prob(model, src_row, tokens):
    """The model's log-probability of `tokens` then EOS, read from one teacher-forced pass."""
    target = torch.tensor([[BOS_ID] + tokens])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src_row.unsqueeze(0), target).double(), -1)[0]
    return float(log_probs.gather(1, torch.tensor(tokens + [EOS_ID]).unsqueeze(1)).sum())


@pytest.mark.parametrize("kind", ["wu", "fairseq"])
def test_n_best_scores_are_the_models_normalized_log_probabilities(kind):
    model, src = make_model("transformer").eval().double(), random_sources(lengths=(3, 6, 4), seed=3)
    norm = LengthNormalization(0.8, kind, False)
    result = beam_search(model, src, 4, norm, 1.5, 5, n_best=4)
    for i, ranked in enumerate(result.n_best):
        assert len(ranked) == 4 and len({tuple(tokens) for tokens, _ in ranked}) == 4
        scores = [score for _, score in ranked]
        assert scores == sorted(scores, reverse=True)
        row = src[i, :int(src[i].ne(PAD_ID).sum())]
        for tokens, score in ranked:
            penalty = norm.penalty(len(tokens) + 1)
            assert score * penalty == pytest.approx(_forced_log_prob(model, row, tokens), rel=1e-5)  # fp32 sums
    one = beam_search(model, src, 4, norm, 1.5, 5)  # without the patient stop, the list leaves the search alone
    assert one.tokens == result.tokens and [r[0][0] for r in result.n_best] == result.tokens
    torch.testing.assert_close(one.scores, result.scores, rtol=0, atol=0)


def test_n_best_keeps_the_best_hypothesis_attention():
    model, src = make_model("bahdanau").eval(), random_sources()
    one = beam_search(model, src, 3, WU, 1.5, 5, attention_choice=AttentionChoice())
    three = beam_search(model, src, 3, WU, 1.5, 5, attention_choice=AttentionChoice(), n_best=3)
    assert three.tokens == one.tokens
    for a, b in zip(three.attention, one.attention):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_n_best_beyond_the_beam_or_with_greedy_search_is_refused():
    from nmt.config import DecodeConfig
    from nmt.search import search

    model, src = MarkovToy(), torch.tensor([[7, EOS_ID]])
    with pytest.raises(ValueError, match="between 1 and the beam size 2"):
        beam_search(model, src, beam_size=2, norm=NONE, max_len_a=0.0, max_len_b=5, n_best=3)
    with pytest.raises(ValueError, match="needs beam search"):
        search(model, src, DecodeConfig(beam_size=1), n_best=2)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_search_asked_to_stop_stops_at_its_next_step(beam):
    from nmt.config import DecodeConfig
    from nmt.search import SearchCancelled, search

    model, src = make_model("transformer").eval(), random_sources()
    asked = []

    def cancelled() -> bool:
        asked.append(True)
        return len(asked) > 3

    with pytest.raises(SearchCancelled):
        search(model, src, DecodeConfig(beam_size=beam, max_len_a=1.5, max_len_b=5), cancelled=cancelled)
    assert len(asked) == 4  # asked once per step, stopped at the fourth
    finished = search(model, src, DecodeConfig(beam_size=beam, max_len_a=1.5, max_len_b=5), cancelled=lambda: False)
    assert finished.tokens == search(model, src, DecodeConfig(beam_size=beam, max_len_a=1.5, max_len_b=5)).tokens


def _sampler(top_k=0, top_p=1.0, temperature=1.0, seed=0):
    from nmt.search import Sampler

    return Sampler(top_k, top_p, temperature, torch.Generator().manual_seed(seed))


def _first_pieces(sampler, rows=2000):
    """What MarkovToy's first step draws for `rows` sentences: P(A)=.5, P(B)=.4, P(EOS)=.1."""
    model, src = MarkovToy(), torch.tensor([[7, EOS_ID]] * rows)
    drawn = greedy_search(model, src, max_len_a=0.0, max_len_b=2, pick=sampler)  # one free step, then EOS
    return [tokens[0] if tokens else EOS_ID for tokens in drawn.tokens]


def test_sampling_draws_in_proportion_and_top_k_and_top_p_cut_the_tail():
    everything = _first_pieces(_sampler())
    assert 0.45 < everything.count(A) / 2000 < 0.55 and 0.35 < everything.count(B) / 2000 < 0.45
    assert 0.07 < everything.count(EOS_ID) / 2000 < 0.13
    top2 = _first_pieces(_sampler(top_k=2))
    assert EOS_ID not in top2 and 0.50 < top2.count(A) / 2000 < 0.61  # .5 / .9 = .56
    assert set(_first_pieces(_sampler(top_p=0.45))) == {A}  # A alone (.5) reaches .45
    assert set(_first_pieces(_sampler(top_p=0.6))) == {A, B}  # A and B reach .9; EOS comes after
    assert set(_first_pieces(_sampler(temperature=0.01))) == {A}  # a cold sampler is the arg-max


@pytest.mark.parametrize("top_k,top_p", [(0, 1.0), (2, 1.0), (0, 0.95), (2, 0.95)])
def test_a_temperature_near_zero_is_the_arg_max_not_a_division_overflowed(top_k, top_p):
    """Logits over 1e-40 overflowed float32 to -inf in every column: softmax gave NaN and every row drew the
    vocabulary's last piece. Shifted to the row's maximum first, the most probable piece stays at 0."""
    assert set(_first_pieces(_sampler(top_k=top_k, top_p=top_p, temperature=1e-40), rows=200)) == {A}
    assert set(_first_pieces(_sampler(top_k=top_k, top_p=top_p, temperature=1e-300), rows=200)) == {A}


def test_sampling_is_reproducible_by_its_seed_and_scores_the_models_own_log_probability():
    model, src = make_model("transformer").eval().double(), random_sources(lengths=(3, 6, 4, 5), seed=3)
    hot = _sampler(top_k=5, temperature=2.0, seed=1)
    drawn = greedy_search(model, src, 1.5, 5, pick=hot)
    again = greedy_search(model, src, 1.5, 5, pick=_sampler(top_k=5, temperature=2.0, seed=1))
    other = greedy_search(model, src, 1.5, 5, pick=_sampler(top_k=5, temperature=2.0, seed=2))
    assert drawn.tokens == again.tokens and drawn.tokens != other.tokens
    assert drawn.tokens != greedy_search(model, src, 1.5, 5).tokens  # a hot untrained model wanders
    for i, tokens in enumerate(drawn.tokens):
        row = src[i, :int(src[i].ne(PAD_ID).sum())]
        assert drawn.scores[i].item() == pytest.approx(_forced_log_prob(model, row, tokens), rel=1e-5)


def test_sampled_n_best_lists_are_draws_ranked_by_normalized_score():
    from nmt.config import DecodeConfig
    from nmt.search import search

    model, src = make_model("transformer").eval(), random_sources(lengths=(3, 6), seed=4)
    decode = DecodeConfig(beam_size=1, sampling_topk=0, sampling_temperature=1.5, max_len_a=1.5, max_len_b=5)
    result = search(model, src, decode, n_best=4)
    norm = LengthNormalization.from_config(decode)
    for ranked, best in zip(result.n_best, result.tokens):
        assert len(ranked) == 4 and ranked[0][0] == best
        normalized = [score / norm.penalty(len(tokens) + 1) for tokens, score in ranked]
        assert normalized == sorted(normalized, reverse=True)
    assert len({tuple(t) for ranked in result.n_best for t, _ in ranked}) > 2  # draws, not copies
    with pytest.raises(ValueError, match="beam_size must be 1"):
        search(model, src, DecodeConfig(beam_size=3, sampling_topk=5))


def test_ban_repeats_forbids_the_piece_that_would_repeat_an_n_gram():
    from nmt.search import ban_repeats

    log_probs = torch.zeros(2, 6)
    history = torch.tensor([[A, B, A], [B, B, A]])
    banned = ban_repeats(log_probs, history, 2)  # row 0 ends in A and has "A B": B banned; row 1's A is new
    assert banned[0].tolist() == [0, 0, 0, 0, 0, float("-inf")] and banned[1].tolist() == [0.0] * 6
    assert ban_repeats(log_probs, history, 1)[1, B] == float("-inf")  # n 1: no piece twice
    assert torch.equal(ban_repeats(log_probs, history, 0), log_probs)
    assert torch.equal(ban_repeats(log_probs, history, 4), log_probs)  # too short to hold a 4-gram and its suffix


def _repeats(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("beam", [1, 3])
def test_searches_with_no_repeat_ngrams_produce_none_and_score_what_the_model_says(beam):
    from nmt.config import DecodeConfig
    from nmt.search import search

    # An untrained model loops; the longest outputs run to the limit (1.5 × 9 + 5 pieces).
    model, src = make_model("transformer").eval().double(), random_sources(lengths=(3, 9, 6, 8), seed=5)
    decode = DecodeConfig(beam_size=beam, max_len_a=1.5, max_len_b=5, patient_stop=False)
    looping = search(model, src, decode)
    assert any(_repeats(tokens, 2) for tokens in looping.tokens)
    free = search(model, src, dataclasses.replace(decode, no_repeat_ngram_size=2))
    assert not any(_repeats(tokens, 2) for tokens in free.tokens)
    norm = LengthNormalization.from_config(decode)
    for i, tokens in enumerate(free.tokens):
        row = src[i, :int(src[i].ne(PAD_ID).sum())]
        score = free.scores[i].item() * (norm.penalty(len(tokens) + 1) if beam > 1 else 1.0)
        assert score == pytest.approx(_forced_log_prob(model, row, tokens), rel=1e-5)  # banned, not renormalized


def _prefixes(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def test_greedy_search_forced_onto_its_own_start_finds_its_own_output():
    model, src = make_model("transformer").eval(), random_sources(seed=5)
    free = greedy_search(model, src, 1.5, 5)
    prefix = _prefixes([tokens[:2] for tokens in free.tokens])
    forced = greedy_search(model, src, 1.5, 5, prefix=prefix)
    assert forced.tokens == free.tokens
    torch.testing.assert_close(forced.scores, free.scores)


@pytest.mark.parametrize("beam", [1, 3])
def test_every_output_starts_with_its_prefix_scored_as_the_model_scores_it(beam):
    model, src = make_model("transformer").eval().double(), random_sources(lengths=(3, 6, 4), seed=7)
    wanted = [[9, 9, 9, 12], [], [30]]  # pieces the model would not choose; a row without a prefix
    prefix = _prefixes(wanted)
    if beam == 1:
        result = greedy_search(model, src, 0.0, 2, prefix=prefix)  # a limit below the prefix: room is made
        log_probs = result.scores.tolist()
    else:
        result = beam_search(model, src, beam, NONE, 0.0, 2, n_best=beam, prefix=prefix)
        log_probs = [score for ranked in result.n_best for _, score in ranked[:1]]
        assert all(tokens[:len(w)] == w for ranked, w in zip(result.n_best, wanted) for tokens, _ in ranked)
    alone = greedy_search(model, src[1:2], 0.0, 2) if beam == 1 else beam_search(model, src[1:2], beam, NONE, 0.0, 2)
    assert result.tokens[1] == alone.tokens[0]  # the row without a prefix decodes as it would alone
    for i, (tokens, w) in enumerate(zip(result.tokens, wanted)):
        assert tokens[:len(w)] == w and len(tokens) <= max(len(w), 2)
        row = src[i, :int(src[i].ne(PAD_ID).sum())]
        assert log_probs[i] == pytest.approx(_forced_log_prob(model, row, tokens), rel=1e-6)


def test_sampled_outputs_start_with_their_prefix():
    from nmt.config import DecodeConfig
    from nmt.search import search

    model, src = make_model("transformer").eval(), random_sources(seed=2)
    decode = DecodeConfig(beam_size=1, sampling_topk=0, sampling_seed=3)
    result = search(model, src, decode, n_best=3, prefix=_prefixes([[7, 8]] * len(src)))
    assert all(tokens[:2] == [7, 8] for ranked in result.n_best for tokens, _ in ranked)
