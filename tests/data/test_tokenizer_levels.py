"""data.tokenizer_type char and word, as JoeyNMT's `level` offers them beside subwords: characters, or whole words
(the d2l.ai textbook's vocabulary, an unseen word <unk>); each prepared, trained and translating."""

import pytest

from nmt.config import DataConfig, load_config
from nmt.data.prepare import prepare
from nmt.data.tokenizer import Tokenizers
from nmt.errors import ConfigError, NMTError
from tests_helpers import TOY_DATA, TOY_RUN, nmt, toy_parallel_corpus, write_config


def _corpus(tmp_path, extra: str = ""):
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text(toy_parallel_corpus() + extra, encoding="utf-8")
    return dict(TOY_DATA, corpus=str(corpus), source_lang="en", target_lang="fr")


def test_char_and_word_vocabularies_hold_characters_and_words(tmp_path):
    data = _corpus(tmp_path)
    said = []
    chars = Tokenizers.from_dir(prepare(DataConfig(**data, tokenizer_type="char"), tmp_path / "c", log=said.append))
    pieces = chars.source.encode("I have one cats.", out_type=str)
    assert pieces[:5] == ["▁", "I", "▁", "h", "a"] and all(len(piece) == 1 for piece in pieces)
    assert not any(line.startswith("unknown pieces") for line in said)  # byte fallback: no <unk>
    words = Tokenizers.from_dir(prepare(DataConfig(**data, tokenizer_type="word", byte_fallback=False),
                                        tmp_path / "w", log=said.append))
    ids = words.source.encode("I have one cats.")
    assert [words.source.id_to_piece(i) for i in ids] == ["▁I", "▁have", "▁one", "▁cats."]
    # An unseen word is <unk>, which decodes as SentencePiece's " ⁇ ", not as bytes with their "▁" marker.
    assert words.source.decode(words.source.encode("I have Zyxw.")) == "I have ⁇ "


def test_a_word_vocabulary_smaller_than_the_words_says_how_much_is_unknown(tmp_path):
    said = []
    rare = "".join(f"I have word{n}.\tJ'ai mot{n}.\n" for n in range(100))  # words seen once: left out of 64
    prepare(DataConfig(**{**_corpus(tmp_path, rare), "vocab_size": 64}, tokenizer_type="word", byte_fallback=False),
            tmp_path / "w", log=said.append)
    unknown = next(line for line in said if line.startswith("unknown pieces"))
    assert unknown.startswith("unknown pieces (<unk>) in the training text: ") and "% of the source's " in unknown


def test_what_a_char_or_word_vocabulary_cannot_do_is_said(tmp_path):
    with pytest.raises(ConfigError, match=r"data.tokenizer_type word with data.byte_fallback: an unseen word would "
                                          r"be spelt in bytes .* set data.byte_fallback: false"):
        load_config(write_config(tmp_path, base=TOY_RUN, data={"tokenizer_type": "word"}))
    with pytest.raises(NMTError, match=r"SentencePiece training failed \(data.vocab_size=100\): the vocabulary must "
                                       r"hold more than the 256 byte pieces and the 4 markers; raise data.vocab_size "
                                       r"\(a char model keeps the commonest characters up to it\), or set "
                                       r"data.byte_fallback: false"):
        prepare(DataConfig(**{**_corpus(tmp_path), "vocab_size": 100}, tokenizer_type="char"), tmp_path / "c",
                log=lambda *_: None)


@pytest.mark.slow
@pytest.mark.parametrize("level", [{"tokenizer_type": "char"}, {"tokenizer_type": "word", "byte_fallback": False}])
def test_a_char_or_word_run_trains_and_translates(tmp_path, level):
    data = {**_corpus(tmp_path), **level}
    run = tmp_path / "run"
    config = write_config(tmp_path, base=TOY_RUN, data=data, train={"max_steps": 10, "eval_every": 10})
    trained = nmt("train", "--config", config, "--run-dir", run, "--data-dir", tmp_path / "data")
    assert trained.returncode == 0, trained.stderr
    translated = nmt("translate", "--run", run, "I have one cats.")
    assert translated.returncode == 0 and translated.stdout.strip(), translated.stderr
