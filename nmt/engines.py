"""One small interface for the two inference engines, used by `translate`, `evaluate` and `serve`.

- `nmt`: `Translator`, the run's PyTorch checkpoint (attention matrices, every architecture);
- `ctranslate2`: `CTranslate2Engine`, an `nmt export` directory (Transformers only, no attention matrices).

Both carry the `DecodeConfig` they decode with (`engine.decode`: the run's, or the export's copy of it, with the
command line's overrides and whatever the engine cannot do replaced): reports and `/health` print exactly that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol, Sequence

from nmt.config import DecodeConfig
from nmt.data.normalizer import Normalizer
from nmt.data.tokenizer import Tokenizers
from nmt.data.stream import in_chunks
from nmt.device import cap_threads_at_usable_cpus
from nmt.errors import NMTError, RepeatedWarning
from nmt.models.base import AttentionChoice
from nmt.translator import Hypothesis, Translation, Translator

ENGINES = ("nmt", "ctranslate2")


class Engine(Protocol):
    name: str
    decode: DecodeConfig
    has_attention: bool
    attention_layers_heads: tuple[int, int]
    checkpoint_label: str | None  # names reports of a checkpoint other than the run's default (e.g. "last")
    trained_on: Path | None  # where the model's training data was prepared (evaluate falls back to it), if known
    normalizer: Normalizer  # the run's, applied to sources (and, at preparation, to the references of its splits)
    tokenizers: Tokenizers  # the run's SentencePiece model(s)
    max_target_positions: int | None  # the decoder's positions (start token included); None: any length
    truncations: RepeatedWarning  # hears of each source cut to decode.max_input_tokens (the first few are shown)
    source_lang: str  # what the report's length buckets count (words, or characters for zh/ja/ko)
    target_lang: str  # what BLEU's tokenizer follows (nmt.metrics)

    def translate(self, sentences: list[str], beam_size: int | None = None,
                  attention: AttentionChoice | None = None, n_best: int = 1,
                  cancelled: Callable[[], bool] | None = None,
                  prefixes: Sequence[str | None] | None = None,
                  decode: DecodeConfig | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[Translation]: ...

    def score(self, sources: list[str], targets: list[str]) -> list[Hypothesis]: ...

    def count_pieces(self, sentence: str, prefix: str | None = None) -> int: ...

    def check_attention_choice(self, choice: AttentionChoice) -> None: ...

    def describe(self) -> dict: ...


def open_engine(engine: str, run: Path | None = None, checkpoint: Path | None = None, model: Path | None = None,
                device: str = "auto", decode_overrides: dict | None = None,
                warn: Callable[[str], None] | None = None, ensemble: Sequence[Path] = ()) -> Engine:
    """The engine named `engine`: a run (or checkpoint) for `nmt`, with the models of `ensemble` beside it when
    given; an export directory (`model`) for ctranslate2."""
    if engine == "nmt":
        if model is not None:
            raise NMTError("--model is for --engine ctranslate2; the nmt engine takes --run or --checkpoint")
        kwargs = {"warn": warn} if warn else {}
        translator = Translator.from_run(run, checkpoint, device, decode_overrides, ensemble=ensemble, **kwargs)
        if translator.device.type == "cpu":  # as training does: torch's default, at most the CPUs it may use
            cap_threads_at_usable_cpus()
        return translator
    if engine == "ctranslate2":
        if model is None:
            raise NMTError("--engine ctranslate2 needs --model DIR (made by `nmt export`)")
        if ensemble:
            raise NMTError("CTranslate2 decodes one model: --ensemble is for the nmt engine (--run, --checkpoint)")
        if run is not None or checkpoint is not None:
            raise NMTError("--engine ctranslate2 takes --model DIR, not --run or --checkpoint")
        from nmt.ct2_engine import CTranslate2Engine

        return CTranslate2Engine(model, device, decode_overrides=decode_overrides, warn=warn)
    raise NMTError(f"unknown engine {engine!r}: use {' or '.join(ENGINES)}")


def tab_separated_phrases(text: str) -> list[str]:
    """`phrase<TAB>phrase...` as constraint phrases; empty fields (a trailing tab) are no phrase."""
    return [p for p in text.split("\t") if p.strip()]


def with_constraints(lines: list[str], constraints: Sequence[str], tab_constraints: bool
                     ) -> tuple[list[str], list[list[str]] | None]:
    """The sources of `lines` and each one's phrases: `constraints` (every sentence's), and with `tab_constraints`
    those after its tabs too (`source<TAB>phrase<TAB>...`, fairseq-interactive's --constraints, Sockeye's input);
    None when no sentence has any."""
    if not tab_constraints:
        return lines, [list(constraints)] * len(lines) if constraints else None
    split = [line.partition("\t") for line in lines]
    return [source for source, _, _ in split], [[*constraints, *tab_separated_phrases(rest)] for _, _, rest in split]


def translate_stream(engine: Engine, lines: Iterable[str], chunk_size: int | None = None,
                     n_best: int = 1, prefix: str | None = None,
                     attention: AttentionChoice | None = None, constraints: Sequence[str] = (),
                     tab_constraints: bool = False) -> Iterator[Translation]:
    """Translate an unbounded stream in chunks (default: 4 decode batches), one result per input line, in order;
    with `prefix`, every translation starts with it; with `attention`, each carries that source attention; with
    `constraints`, every translation holds those phrases, and with `tab_constraints` the phrases after each line's
    tabs too (`with_constraints`).

    Only the final line feed (and a CR before it) ends a line; any other CR is text, as for `wc -l`.
    """
    texts = (line.removesuffix("\n").removesuffix("\r") for line in lines)
    for chunk in in_chunks(texts, chunk_size or engine.decode.batch_size * 4):
        chunk, held = with_constraints(chunk, constraints, tab_constraints)
        yield from engine.translate(chunk, attention=attention, n_best=n_best,
                                    prefixes=[prefix] * len(chunk) if prefix else None, constraints=held)


def n_best_lines(index: int, translation: Translation) -> list[str]:
    """A translation's hypotheses in the Moses n-best format that Marian and rerankers read, best first:
    `index ||| text ||| logprob= L ||| score` (index from 0; score: what beam search ranks by). An empty input
    keeps its place with one empty hypothesis of score 0."""
    hypotheses = translation.hypotheses or [Hypothesis("", 0.0, 0.0)]
    return [f"{index} ||| {h.text} ||| logprob= {h.log_prob:.4f} ||| {h.score:.4f}" for h in hypotheses]
