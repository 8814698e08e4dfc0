"""`nmt score` and `Engine.score`: the model's log-probability of given pairs, as search would score them."""

import math
import random

import pytest

from nmt.errors import NMTError
from nmt.scoring import Totals, pairs_of_lines, score_stream
from nmt.engine_inputs import TargetTooLong
from nmt.translator import Translator, runs_within
from tests_helpers import nmt, text_of_pieces, toy_parallel_corpus


@pytest.fixture(scope="module")
def translator(toy_transformer_run):
    return Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})


def toy_pairs(count=60):
    return [tuple(line.split("\t")) for line in toy_parallel_corpus().splitlines()][:count]


def test_a_pair_search_found_scores_as_the_search_scored_it(translator):
    sources = [s for s, _ in toy_pairs(30)]
    compared = 0
    for result in translator.translate(sources, beam_size=3, n_best=3):
        scored = translator.score([result.source] * 3, [h.text for h in result.hypotheses])
        for found, forced in zip(result.hypotheses, scored):
            if forced.pieces == found.pieces:  # the text tokenizes back to the pieces the search chose
                compared += 1
                assert forced.log_prob == pytest.approx(found.log_prob, rel=1e-4, abs=1e-4)
                assert forced.score == pytest.approx(found.score, rel=1e-4, abs=1e-4)
    assert compared >= 60, f"only {compared} of 90 hypotheses tokenized back to their own pieces"


def test_scores_do_not_depend_on_the_batching_and_keep_the_input_order(translator):
    pairs = toy_pairs(40)
    random.Random(0).shuffle(pairs)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    together = translator.score(sources, targets)
    small_batches = translator.score(sources, targets, positions_per_batch=16)
    alone = [translator.score([s], [t])[0] for s, t in pairs]
    for a, b, c in zip(together, small_batches, alone):
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-5) == pytest.approx(c.log_prob, abs=1e-5)
        assert a.pieces == c.pieces and a.log_prob < 0


def perplexity(scored) -> float:
    return math.exp(-sum(h.log_prob for h in scored) / sum(h.pieces for h in scored))


def test_true_translations_score_higher_than_mismatched_ones(translator):
    pairs = toy_pairs(400)[::7]  # across the corpus: other subjects, numbers and things
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    true = translator.score(sources, targets)
    half = len(targets) // 2
    mismatched = translator.score(sources, targets[half:] + targets[:half])
    # The toy model (150 updates) is no oracle: here 48 of 58, perplexity 2.86 against 3.48; broken scoring gives
    # about half and equal perplexities.
    better = sum(a.log_prob > b.log_prob for a, b in zip(true, mismatched))
    assert better >= 0.7 * len(pairs), f"the true translation scored higher for only {better} of {len(pairs)}"
    assert perplexity(true) < 0.9 * perplexity(mismatched)


def test_score_refuses_unpaired_input(translator):
    with pytest.raises(NMTError, match="2 sources but 1 targets"):
        translator.score(["a", "b"], ["x"])


def test_a_target_the_positions_cannot_hold_is_refused_and_named_by_its_line(translator):
    # model.max_positions 1024 holds the start token, the target and EOS: 1022 pieces are scored, 1023 refused.
    longest = text_of_pieces(translator, 1022)
    assert translator.score(["Go."], [longest])[0].pieces == 1023  # EOS included
    with pytest.raises(TargetTooLong, match=r"^target 1 is 1023 pieces; this model holds a target of at most 1022 "):
        translator.score(["Go.", "Hi."], ["Va !", longest + longest[-1]])
    pairs = [("Go.", "Va !")] * 5 + [("Hi.", longest + longest[-1])]
    scored = score_stream(translator, pairs, chunk_size=2)
    assert len([next(scored) for _ in range(4)]) == 4  # the chunks before it are scored and printed
    with pytest.raises(NMTError, match=r"^the target on line 6 is 1023 pieces; this model holds a target of at most "
                                       r"1022 \(model.max_positions 1024, with the start token and EOS\)$"):
        list(scored)


def test_runs_within_a_budget_of_padded_positions():
    assert runs_within([2, 3, 3, 5, 9], 10) == [(0, 3), (3, 4), (4, 5)]  # 3×3 fits, 2×5 would, 2×9 would not
    assert runs_within([20], 10) == [(0, 1)] and runs_within([], 10) == []


def test_pairs_of_lines_take_the_first_two_columns_and_name_a_line_without_a_tab():
    assert list(pairs_of_lines(["go .\tva !\tCC-BY 2.0\n", "hi .\tsalut .\r\n", "\t\n"])) == [
        ("go .", "va !"), ("hi .", "salut ."), ("", "")]
    with pytest.raises(NMTError, match="line 2 has no TAB"):
        list(pairs_of_lines(["a\tb\n", "just a sentence\n"]))


def test_totals_give_the_perplexity_per_piece():
    from nmt.translator import Hypothesis

    totals = Totals()
    totals.add(Hypothesis("a", -1.0, -2.0, 2))
    totals.add(Hypothesis("b", -1.0, -4.0, 4))
    assert totals.describe() == (f"scored 2 pairs: 6 target pieces (EOS included), log-probability -6.00, "
                                 f"perplexity {math.exp(1):,.2f} per piece")


def test_a_perplexity_past_floats_is_infinite_not_an_overflow():
    """A diverged model's targets can average below -709 nats a piece, where math.exp overflows (a traceback)."""
    from nmt.translator import Hypothesis

    totals = Totals()
    totals.add(Hypothesis("a", -800.0, -1600.0, 2))
    assert totals.describe().endswith("log-probability -1,600.00, perplexity inf per piece")


@pytest.mark.slow
def test_cli_scores_stdin_pairs_and_files_alike(toy_transformer_run, tmp_path):
    pairs = toy_pairs(5)
    piped = nmt("score", "--run", toy_transformer_run, input="".join(f"{s}\t{t}\n" for s, t in pairs))
    assert piped.returncode == 0, piped.stderr
    rows = [[float(x) for x in line.split("\t")] for line in piped.stdout.splitlines()]
    expected = Translator.from_run(toy_transformer_run, device="cpu").score(*zip(*pairs))  # the CLI's precision
    assert [row[0] for row in rows] == pytest.approx([h.log_prob for h in expected], abs=2e-4)
    assert [row[1] for row in rows] == pytest.approx([h.score for h in expected], abs=2e-4)
    assert "scored 5 pairs:" in piped.stderr and "perplexity" in piped.stderr
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    files = nmt("score", "--run", toy_transformer_run, "--src", tmp_path / "src.txt", "--tgt", tmp_path / "tgt.txt")
    assert files.returncode == 0 and files.stdout == piped.stdout
    # `-` is stdin, for either side (it was "file not found: -").
    dash = nmt("score", "--run", toy_transformer_run, "--src", tmp_path / "src.txt", "--tgt", "-",
               input=(tmp_path / "tgt.txt").read_text(encoding="utf-8"))
    assert dash.returncode == 0 and dash.stdout == piped.stdout, dash.stderr
    # WMT's XML of a source and its references, named for both: each side read in the run's language for it.
    from xml.sax.saxutils import escape

    def segments(texts) -> str:
        return "".join(f'<seg id="{n}">{escape(text)}</seg>\n' for n, text in enumerate(texts, 1))

    (tmp_path / "test.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<dataset id="t">\n<doc id="1">\n<src lang="en">\n<p>\n'
        f'{segments(s for s, _ in pairs)}</p>\n</src>\n<ref lang="fr" translator="A">\n<p>\n'
        f'{segments(t for _, t in pairs)}</p>\n</ref>\n</doc>\n</dataset>\n', encoding="utf-8")
    xml = nmt("score", "--run", toy_transformer_run, "--src", tmp_path / "test.xml", "--tgt", tmp_path / "test.xml")
    assert xml.returncode == 0 and xml.stdout == piped.stdout, xml.stderr
    (tmp_path / "short.txt").write_text("one line\n", encoding="utf-8")
    for args, fragment in ((["--src", tmp_path / "src.txt"], "--src and --tgt go together"),
                           (["--src", tmp_path / "src.txt", "--tgt", tmp_path / "short.txt"], "has 1 line: score"),
                           ([], "line 1 has no TAB"),
                           (["--src", "-", "--tgt", "-"], "- (stdin) is given for more than one file")):
        refused = nmt("score", "--run", toy_transformer_run, *args, input="no tab\n")
        assert refused.returncode == 2 and fragment in refused.stderr and refused.stdout == "", refused.stderr
