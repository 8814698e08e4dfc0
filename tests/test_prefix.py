"""Target prefixes: the start of a translation is given and the model continues it (interactive translation)."""

import pytest

from nmt.errors import NMTError
from nmt.translator import Translator
from tests_helpers import nmt, text_of_pieces


@pytest.fixture(scope="module")
def translator(toy_transformer_run):
    return Translator.from_run(toy_transformer_run, device="cpu", decode_overrides={"precision": "fp32"})


SOURCES = ["I have two cats.", "She has five keys.", "They have three books.", ""]


@pytest.mark.parametrize("beam", [1, 3])
def test_translations_continue_their_prefix_and_are_scored_whole(translator, beam):
    free = translator.translate(SOURCES, beam_size=beam)
    prefixed = translator.translate(SOURCES, beam_size=beam, prefixes=["Nous avons", None, "Elle", "Ils"])
    assert not free[0].text.startswith("Nous avons")  # so the prefix changed the output
    assert prefixed[0].text.startswith("Nous avons ") and prefixed[2].text.startswith("Elle ")
    assert prefixed[1].text == free[1].text  # no prefix: as without any
    assert prefixed[3].text == ""  # an empty source keeps its empty line, prefix or not
    # The prefix's pieces count in the score: teacher forcing the whole output gives the search's number.
    for result in (prefixed[0], prefixed[2]):
        forced = translator.score([result.source], [result.text])[0]
        assert forced.log_prob == pytest.approx(result.hypotheses[0].log_prob, rel=1e-4, abs=1e-4)


def test_prefixes_one_per_sentence_or_a_one_line_error(translator):
    with pytest.raises(NMTError, match="2 prefixes for 4 sentences"):
        translator.translate(SOURCES, prefixes=["Nous", "Elle"])
    with pytest.raises(NMTError, match="^2 prefixes for 1 sentence: give one per sentence"):
        translator.translate(SOURCES[:1], prefixes=["Nous", "Elle"])


def test_a_prefix_the_positions_cannot_hold_is_refused_naming_the_limit(translator, toy_transformer_run):
    # model.max_positions 1024 holds the start token, the prefix and EOS: 1022 pieces are continued, 1023 refused
    # before any decoding (as `score` refuses such a target: CTranslate2's scoring of it needs 1025 positions).
    longest = text_of_pieces(translator, 1022)
    assert translator.translate(["Go."], beam_size=1, prefixes=[longest])[0].text.startswith(longest)
    with pytest.raises(NMTError, match=r"^prefix 1 is 1023 pieces; this model holds a target of at most 1022 "):
        translator.translate(["Go.", "Hi."], prefixes=[None, longest + longest[-1]])
    refused = nmt("translate", "--run", toy_transformer_run, "--prefix", longest * 2, "Go.")
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.splitlines()[-1] == ("error: prefix 0 is 2044 pieces; this model holds a target of at most "
                                               "1022 (model.max_positions 1024, with the start token and EOS)")


def test_a_long_prefix_counts_in_the_memory_a_decoding_batch_takes(translator, monkeypatch):
    import nmt.translator as module

    asked = []  # the bytes per hypothesis row that the batch size is derived from
    monkeypatch.setattr(module, "decode_rows_that_fit", lambda row, device, share=0.5: asked.append(row) or 10**6)
    prefix = text_of_pieces(translator, 600)
    translator.translate(["Go."], beam_size=2)
    assert translator.translate(["Go."], beam_size=2, prefixes=[prefix])[0].text.startswith(prefix)
    assert len(asked) == 2
    source_len = len(translator.tokenizers.source.encode(translator.normalizer.source("Go."))) + 1
    shape, vocab = translator.members[0][1], translator.tokenizers.target.get_piece_size()
    # Its 600 steps and EOS, not the length limit's few, are what each row's key/value caches grow to.
    assert asked[1] == module.decode_row_bytes(shape, vocab, source_len, 601) > 10 * asked[0]


def test_cli_prefix_for_arguments_stdin_and_n_best_lists(toy_transformer_run):
    args = ["translate", "--run", toy_transformer_run, "--prefix", "Nous avons", "--beam", "3"]
    given = nmt(*args, *SOURCES[:3])
    assert given.returncode == 0, given.stderr
    assert all(line.startswith("Nous avons ") for line in given.stdout.splitlines())
    piped = nmt(*args, input="\n".join(SOURCES[:3]) + "\n")
    assert piped.stdout == given.stdout
    listed = nmt(*args, "--n-best", "3", SOURCES[0])
    rows = [line.split(" ||| ") for line in listed.stdout.splitlines()]
    assert len(rows) == 3 and all(row[1].startswith("Nous avons") for row in rows)
