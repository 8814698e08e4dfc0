"""Lexically constrained beam search: every hypothesis holds its sentence's phrases, the best such one found."""

import math

import pytest
import torch

from nmt.constrained_search import ConstraintBatch, Progress, striped
from nmt.errors import NMTError
from nmt.data.tokenizer import EOS_ID
from nmt.search import LengthNormalization, beam_search
from test_search import A, B, NONE, MarkovToy
from tests_helpers import VOCAB, make_model, nmt, random_sources


def constraints(*sentences):
    return ConstraintBatch.of([list(s) for s in sentences], torch.device("cpu"))


def progress_after(tokens, phrases):
    batch = constraints(phrases)
    progress = Progress.start(batch.lengths)
    for token in tokens:
        progress = progress.advance(torch.tensor([token]), batch.pieces, batch.lengths, batch.borders,
                                    twins=batch.twins)
    return progress, batch


@pytest.mark.parametrize("tokens,met,matched,pieces_met", [
    ([5, 6], 0b01, [0, 0], 2),  # the first phrase whole
    ([7], 0b10, [0, 0], 1),  # a phrase of one piece is whole at once
    ([5], 0b00, [1, 0], 1),  # under way
    ([5, 9], 0b00, [0, 0], 0),  # broken off: nothing in place
    ([5, 7], 0b10, [0, 0], 1),  # broken off by a piece that meets the other phrase
    ([5, 5, 6], 0b01, [0, 0], 2),  # the piece that broke it begins it again
    ([7, 5, 6, 7], 0b11, [0, 0], 3),  # each phrase counted once
])
def test_progress_follows_the_pieces_taken(tokens, met, matched, pieces_met):
    progress, batch = progress_after(tokens, [[5, 6], [7]])
    assert (progress.met.item(), progress.matched[0].tolist()) == (met, matched)
    assert progress.pieces_met(batch.lengths).item() == pieces_met
    assert progress.done(batch.lengths).item() == (met == 0b11)


@pytest.mark.parametrize("phrases,tokens,met", [
    ([[5, 5, 6]], [5, 5, 5, 6], 0b1),  # a phrase that overlaps itself, met after a false start
    ([[5, 6, 5, 8]], [5, 6, 5, 6, 5, 8], 0b1),
    ([[5, 6], [5, 8]], [5, 8], 0b10),  # phrases that start alike, in either order
    ([[5, 6], [5, 8]], [5, 8, 9, 5, 6], 0b11),
    ([[5, 6], [6, 7]], [5, 6, 7], 0b11),  # one's end is the other's start
    ([[5, 6, 7]], [5, 6, 9, 7], 0b0),
])
def test_every_phrase_is_followed_at_once_and_from_every_start(phrases, tokens, met):
    """Each phrase keeps its own longest start in place (Knuth-Morris-Pratt): one at a time, as fairseq's trie is not
    and this search was at first, missed `5 5 6` in `5 5 5 6`, and `5 8` in `5 8` beside a phrase `5 6`."""
    progress, _ = progress_after(tokens, phrases)
    assert progress.met.item() == met


@pytest.mark.parametrize("phrases,tokens,met", [
    ([[5, 6], [5, 6]], [5, 6], 0b01),  # given twice, met once: the first of the two
    ([[5, 6], [5, 6]], [5, 6, 9, 5, 6], 0b11),
    ([[5, 6], [5, 6]], [5, 6, 5, 6], 0b11),  # back to back
    ([[5, 5], [5, 5]], [5, 5, 5], 0b01),  # occurrences that overlap count once, as fairseq's and Sockeye's
    ([[5, 5], [5, 5]], [5, 5, 5, 5], 0b11),
    ([[7], [8], [7], [7]], [7, 8, 7], 0b0111),
    ([[5, 6], [6]], [5, 6], 0b11),  # a phrase inside another (not the same): one occurrence meets both
])
def test_a_phrase_given_twice_must_be_met_twice(phrases, tokens, met):
    """As fairseq's --constraints and Sockeye's count a repeated constraint: before, one `chat` met `chat` given
    sixteen times."""
    progress, _ = progress_after(tokens, phrases)
    assert progress.met.item() == met


def test_borders_are_knuth_morris_pratts_failure_function():
    from nmt.constrained_search import borders_of

    assert borders_of([1, 1, 2], 3) == [0, 0, 1]
    assert borders_of([1, 2, 1, 2, 3], 6) == [0, 0, 0, 1, 2, 0]
    assert borders_of([4], 3) == [0, 0, 0]


def test_a_piece_that_glues_onto_a_phrase_just_met_takes_it_back():
    """`▁bientôt` `s` is a longer word, not the phrase: a piece that continues a word (here 9) unmeets the phrase it
    follows; a piece that starts a word (10) or ends the sentence leaves it met; without the mask, nothing glues."""
    batch = constraints([[5, 6], [7]])
    continues_word = torch.zeros(VOCAB, dtype=torch.bool)
    continues_word[9] = True

    def after(tokens, mask=continues_word):
        progress = Progress.start(batch.lengths)
        for token in tokens:
            progress = progress.advance(torch.tensor([token]), batch.pieces, batch.lengths, batch.borders, mask)
        return progress.met.item()

    assert after([5, 6, 9]) == 0b00 and after([7, 9]) == 0b00
    assert after([5, 6, 10]) == 0b01 and after([5, 6, EOS_ID]) == 0b01 and after([7, 10, 9]) == 0b10
    assert after([5, 6, 9, 5, 6]) == 0b01  # met again, whole
    assert after([5, 6, 9], None) == 0b01


def test_a_glued_occurrence_of_a_repeated_phrase_counts_for_neither_copy():
    batch = constraints([[7], [7]])
    continues_word = torch.zeros(VOCAB, dtype=torch.bool)
    continues_word[9] = True

    def after(tokens):
        progress = Progress.start(batch.lengths)
        for token in tokens:
            progress = progress.advance(torch.tensor([token]), batch.pieces, batch.lengths, batch.borders,
                                        continues_word, batch.twins)
        return progress.met.item()

    assert after([7, 9]) == 0b00 and after([7, 9, 7]) == 0b01 and after([7, 9, 7, 7]) == 0b11
    assert after([7, 7, 9]) == 0b01  # the second occurrence glued: the first still stands


def test_word_continuations_are_pieces_without_the_word_marker_that_start_with_a_letter():
    from nmt.constrained_search import word_continuations

    pieces = ["<unk>", "<s>", "\u2581maison", "nette", "s", ".", "-", "\u2581?", "<0xC3>", "3"]
    assert word_continuations(pieces).tolist() == [False, False, False, True, True, False, False, False, True, True]


def test_next_pieces_are_the_phrase_under_way_or_the_first_of_each_unmet():
    progress, batch = progress_after([5], [[5, 6], [7, 8]])
    assert progress.next_pieces(batch.pieces, batch.lengths).tolist() == [[6, 7]]
    progress, batch = progress_after([7, 8], [[5, 6], [7, 8]])
    assert progress.next_pieces(batch.pieces, batch.lengths).tolist() == [[5, -1]]


def test_beams_are_striped_across_banks_fullest_first():
    scores = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, float("-inf")]])
    banks = torch.tensor([[0, 0, 1, 2, 1, 2]])
    # rank 0 of banks 2, 1, 0 (columns 3, 2, 0), then rank 1 of bank 1, 0 (4, 1); -inf last
    assert striped(scores, banks, 5, 3).tolist() == [[3, 2, 0, 4, 1]]


def test_every_beam_keeps_its_best_continuation_among_the_candidates():
    """Post & Vilar's third source of candidates: a beam far behind (it paid for a phrase) still gets its own best
    next piece, though beam search's 2K best all extend the beam ahead; and its constraint piece (here 7)."""
    from nmt.constrained_search import ConstraintTracker

    tracker = ConstraintTracker(constraints([[7]]), beam_size=2)
    log_probs = torch.full((2, 10), -20.0)
    log_probs[0, 4:8] = torch.tensor([-0.1, -0.2, -0.3, -0.4])  # beam 0's four best: beam search's 2K
    log_probs[1, 6] = -0.5  # beam 1's best, far behind once its score counts
    scores = torch.tensor([[0.0, -10.0]])
    top_scores, top_index = (scores.unsqueeze(-1) + log_probs.view(1, 2, 10)).view(1, -1).topk(4, dim=1)
    top_rows, top_token = top_index // 10, top_index % 10
    assert top_rows.tolist() == [[0, 0, 0, 0]]
    alive, token, rows = tracker.candidates(top_scores, top_token, top_rows, scores, log_probs)
    offered = {(r, t): a for r, t, a in zip(rows[0].tolist(), token[0].tolist(), alive[0].tolist()) if a > -1e9}
    assert offered[(1, 6)] == pytest.approx(-10.5) and offered[(1, 7)] == pytest.approx(-30.0)
    assert len(offered) == 6  # beam 0's best (4) and its piece 7 are among the 2K already: not twice


def test_the_best_hypothesis_that_holds_the_phrases_is_found():
    """On the hand-made Markov model (unconstrained best: `B`, p = .36): with `A`, "A EOS" (.5 × .3); with `B A`,
    "B A EOS" (.4 × .1 × .3); with `A` and `B` in any order, "A B EOS" (.5 × .3 × .9) beats "B A EOS"."""
    model, src = MarkovToy(), torch.tensor([[7, EOS_ID]] * 3)
    found = beam_search(model, src, beam_size=3, norm=NONE, max_len_a=0.0, max_len_b=4,
                        constraints=constraints([[A]], [[B, A]], [[A], [B]]))
    assert found.tokens == [[A], [B, A], [A, B]]
    expected = [math.log(.5 * .3), math.log(.4 * .1 * .3), math.log(.5 * .3 * .9)]
    assert found.scores.tolist() == pytest.approx(expected, abs=1e-5)
    plain = beam_search(model, src, beam_size=3, norm=NONE, max_len_a=0.0, max_len_b=4)
    assert plain.tokens == [[B]] * 3


def holds(tokens, phrase):
    return any(tokens[i:i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1))


@pytest.mark.parametrize("arch", ["transformer", "luong", "bahdanau"])
def test_every_hypothesis_of_every_sentence_holds_its_phrases(arch):
    """A random model's n-best lists, in a batch where sentences finish at different steps and one has no phrase."""
    torch.manual_seed(0)
    model = make_model(arch).eval()
    src = random_sources()
    phrases = [[[11, 12, 13], [20]], [[30, 31]], [], [[15], [16], [17]]]
    found = beam_search(model, src, beam_size=4, norm=LengthNormalization(1.0, "fairseq", True), max_len_a=1.0,
                        max_len_b=3, n_best=3, constraints=constraints(*phrases))
    plain = beam_search(model, src, beam_size=4, norm=LengthNormalization(1.0, "fairseq", True), max_len_a=1.0,
                        max_len_b=3)
    assert found.tokens[2] == plain.tokens[2]  # no phrase: the plain search's choice
    for sentence, ranked in zip(phrases, found.ranked()):
        assert len(ranked) == 3
        for tokens, _ in ranked:
            assert all(holds(tokens, phrase) for phrase in sentence), (tokens, sentence)
            assert all(t < VOCAB for t in tokens)
    assert not all(holds(plain.tokens[0], p) for p in phrases[0])  # the phrases changed what was found


def occurrences(tokens, phrase) -> int:
    """Non-overlapping occurrences, counted from the left."""
    count, i = 0, 0
    while i <= len(tokens) - len(phrase):
        if tokens[i:i + len(phrase)] == phrase:
            count, i = count + 1, i + len(phrase)
        else:
            i += 1
    return count


def test_every_hypothesis_holds_a_repeated_phrase_as_often_as_it_is_given():
    torch.manual_seed(0)
    model = make_model("transformer").eval()
    phrases = [[[11, 12], [11, 12]], [[20], [20], [20]], [[30]], [[15], [16], [15]]]
    found = beam_search(model, random_sources(), beam_size=4, norm=LengthNormalization(1.0, "fairseq", True),
                        max_len_a=1.0, max_len_b=3, n_best=2, constraints=constraints(*phrases))
    for sentence, ranked in zip(phrases, found.ranked()):
        assert len(ranked) == 2
        for tokens, _ in ranked:
            for phrase in sentence:
                assert occurrences(tokens, phrase) >= sentence.count(phrase), (tokens, sentence)


@pytest.mark.parametrize("arch", ["transformer", "luong"])
def test_a_sentence_without_phrases_is_searched_as_without_constraints(arch):
    """A batch (a --tab-constraints file, a server's requests) mixes sentences with and without phrases: those
    without are translated exactly as plain beam search does, n-best lists and scores alike."""
    model = make_model(arch).eval()
    src = random_sources(lengths=(3, 7, 5, 1, 6, 2, 8, 4), seed=1)
    norm = LengthNormalization(1.0, "fairseq", True)
    phrases = [[[11, 12]], [], [[25]], [], [[30], [31]], [], [[14, 15, 16]], []]
    found = beam_search(model, src, beam_size=4, norm=norm, max_len_a=1.5, max_len_b=4, n_best=4,
                        constraints=constraints(*phrases))
    plain = beam_search(model, src, beam_size=4, norm=norm, max_len_a=1.5, max_len_b=4, n_best=4)
    for i in (1, 3, 5, 7):
        assert [tokens for tokens, _ in found.ranked()[i]] == [tokens for tokens, _ in plain.ranked()[i]], i
        assert [score for _, score in found.ranked()[i]] == pytest.approx([s for _, s in plain.ranked()[i]], abs=1e-5)


@pytest.fixture(scope="module")
def translator(toy_transformer_run):
    from nmt.translator import Translator

    return Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})


SOURCES = ["I have two cats.", "She has five keys.", "They have three books.", ""]


def test_translations_hold_their_phrases_and_are_scored_whole(translator):
    free = translator.translate(SOURCES, beam_size=4)
    held = translator.translate(SOURCES, beam_size=4, n_best=2,
                                constraints=[["livres"], [], ["cinq", "Nous avons"], ["chats"]])
    assert "livres" not in free[0].text  # so the phrase changed the output
    assert all("livres" in h.text.replace(".", " ").split() for h in held[0].hypotheses)  # as a word of its own
    assert len(held[0].hypotheses) == 2
    assert held[1].text == free[1].text  # no phrase: as without any
    assert "cinq" in held[2].text and "Nous avons" in held[2].text
    assert held[3].text == ""  # an empty source keeps its empty line
    forced = translator.score([held[0].source], [held[0].text])[0]  # the search's log-probability is the model's
    assert forced.log_prob == pytest.approx(held[0].hypotheses[0].log_prob, rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("constraints,overrides,message", [
    ([["chats"]], {"beam_size": 1}, "constraints need beam search: a beam of 2 or more"),
    ([["chats"]], {"beam_size": 1, "sampling_topk": 5}, "constraints steer beam search; sampling"),
    ([["  "]], {}, "constraint '  ' has no text"),
    ([["chats"] * 17], {}, "17 constraints for one sentence: at most 16"),
    ([["chats"], ["chats"]], {}, "constraints for 2 sentences but 1 sentences"),
])
def test_constraints_it_cannot_follow_are_refused(translator, constraints, overrides, message):
    import dataclasses

    with pytest.raises(NMTError, match=message):
        translator.translate(["I have two cats."], constraints=constraints,
                             decode=dataclasses.replace(translator.decode, **overrides))


def test_a_constraint_the_position_table_cannot_hold_is_refused(translator):
    with pytest.raises(NMTError, match=r"the constraints of sentence 0 are \d+ pieces: .* passes model.max_positions"):
        translator.translate(["I have two cats."], constraints=[["chats " * 60] * 16])


def test_cli_constraints_for_arguments_stdin_and_tab_separated_lines(toy_transformer_run):
    args = ["translate", "--run", toy_transformer_run, "--beam", "4"]
    given = nmt(*args, "--constraint", "livres", "--constraint", "Vous avez", *SOURCES[:3])
    assert given.returncode == 0, given.stderr
    lines = given.stdout.splitlines()
    assert len(lines) == 3 and all("livres" in line and "Vous avez" in line for line in lines), lines
    piped = nmt(*args, "--constraint", "livres", "--constraint", "Vous avez", input="\n".join(SOURCES[:3]) + "\n")
    assert piped.stdout == given.stdout
    tabbed = nmt(*args, "--tab-constraints", input="I have two cats.\tlivres\t\nShe has five keys.\n")
    assert tabbed.returncode == 0 and "TAB" not in tabbed.stderr, tabbed.stderr  # the tabs are expected here
    first, second = tabbed.stdout.splitlines()
    assert "livres" in first and "\t" not in first and second == nmt(*args, "She has five keys.").stdout.strip()
    refused = nmt(*args, "--beam", "1", "--constraint", "livres", SOURCES[0])
    assert refused.returncode == 2 and refused.stderr.strip().endswith("not greedy search's 1"), refused.stderr


def test_a_phrase_the_vocabulary_cannot_spell_is_refused():
    """Without byte fallback an unseen character is <unk>: a phrase of it would be met by any unknown word."""
    from types import SimpleNamespace

    from nmt.engine_inputs import encode_constraints

    target = SimpleNamespace(encode=lambda text, out_type: [9, 0] if "漢" in text else [9], unk_id=lambda: 0)
    tokenizers, normalizer = SimpleNamespace(target=target), SimpleNamespace(target=lambda text: text)
    assert encode_constraints(tokenizers, normalizer, [["chats"], []], 2) == [[[9]], []]
    with pytest.raises(NMTError, match="constraint 'chats漢' holds characters this model's vocabulary cannot spell"):
        encode_constraints(tokenizers, normalizer, [["chats漢"]], 1)


def test_attention_and_an_ensemble_follow_the_constrained_beams(translator, toy_transformer_run):
    from nmt.models.base import AttentionChoice
    from nmt.translator import Translator

    held = translator.translate(SOURCES[:2], beam_size=3, attention=AttentionChoice(-1, None),
                                constraints=[["livres"], ["Nous avons"]])
    for result in held:
        assert result.attention.shape == (len(result.target_pieces), len(result.source_pieces))
        assert torch.allclose(result.attention.sum(-1), torch.ones(len(result.target_pieces)), atol=1e-3)
    pair = Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"},
                               ensemble=[toy_transformer_run / "checkpoints" / "last.pt"])
    both = pair.translate(SOURCES[:2], beam_size=3, constraints=[["livres"], ["Nous avons"]])
    assert [t.text for t in both] == [t.text for t in held]  # its last.pt is its best.pt: the model twice


def test_cli_evaluate_scores_a_test_set_held_to_its_phrases(toy_transformer_run, tmp_path):
    import json

    src, ref, held = tmp_path / "test.en", tmp_path / "test.fr", tmp_path / "terms.tsv"
    src.write_text("I have two cats.\nShe has five keys.\nThey have three books.\n")
    ref.write_text("J'ai deux livres.\nElle a cinq clés.\nNous avons trois livres.\n")
    held.write_text("livres\n\nNous avons\tlivres\n")
    out = tmp_path / "eval"
    args = ["evaluate", "--run", toy_transformer_run, "--src", src, "--ref", ref, "--out-dir", out, "--beam", "3"]
    done = nmt(*args, "--constraints", held)
    assert done.returncode == 0, done.stderr
    assert "constraints: 3 of 3 phrases held as words (2 sentences constrained;" in done.stdout
    report = json.loads((out / "test.constrained.beam3.report.json").read_text())
    assert report["constraints"] == {"origin": str(held), "sentences": 2, "phrases": 3, "held": 3, "held_share": 1.0}
    lines = (out / "test.constrained.beam3.hyp.txt").read_text().splitlines()
    assert "livres" in lines[0] and "Nous avons" in lines[2] and "livres" in lines[2]
    plain = nmt(*args)  # beside it, not over it
    assert plain.returncode == 0 and (out / "test.beam3.report.json").is_file()
    assert "constraints" not in json.loads((out / "test.beam3.report.json").read_text())
    held.write_text("livres\n")
    short = nmt(*args, "--constraints", held)
    assert short.returncode == 2 and "has 1 line but the test set 3 source sentences" in short.stderr, short.stderr
    both = nmt("evaluate", "--compare", toy_transformer_run, "--compare", toy_transformer_run, "--constraints", held)
    assert both.returncode == 2 and "instead of --compare" in both.stderr
