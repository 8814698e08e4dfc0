"""Text in, text out: normalization, SentencePiece, length-sorted batches, search, detokenization."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from nmt.config import Config, DecodeConfig, ModelConfig, check_n_best
from nmt.constrained_search import ConstraintBatch, word_continuations
from nmt.cpu_memory import heap_trimmer_for
from nmt.data.batching import padded, source_batch
from nmt.data.normalizer import Normalizer
from nmt.data.languages import UNSPACED, base_language
from nmt.data.sources import languages
from nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizers, same_vocabulary
from nmt.device import EMULATED_BF16_NOTE, autocast, autocast_dtype, emulated_bf16, pick_device
from nmt.engine_inputs import (check_overrides_fit_positions, check_target_room, checked_constraints, count_pieces,
                               encode_prefixes, encode_source, sum_of_lengths, with_overrides)
from nmt.errors import NMTError, RepeatedWarning, warn
from nmt.memory import decode_rows_that_fit
from nmt.models.base import AttentionChoice, EncoderDecoder
from nmt.models.builder import build_from_args, build_model, initializers_skipped, upgrade_state_dict
from nmt.models.ensemble import Ensemble
from nmt.run_dir import Run, Weights
from nmt.search import LengthNormalization, as_log_probs, search


@dataclass(frozen=True)
class Hypothesis:
    """One output of the search with what the model thinks of it."""

    text: str
    score: float  # the length-normalized log-probability beam search ranks by (decode.length_normalization)
    log_prob: float  # the model's log-probability of the pieces and EOS, unnormalized
    pieces: int = 0  # target pieces, EOS included: what the log-probability sums over


@dataclass
class Translation:
    source: str
    text: str
    source_pieces: list[str]
    target_pieces: list[str]
    attention: torch.Tensor | None = None  # (target pieces + EOS, source pieces + EOS)
    # Best first, `text` first of all: the n best asked for (one by default); none for an empty input.
    hypotheses: list[Hypothesis] = dataclasses.field(default_factory=list)
    source_cut: bool = False  # the source was over decode.max_input_tokens: `text` translates only its start


class Translator:
    """The PyTorch engine: a model with its run's tokenizer, normalization and decoding settings; `run`,
    `checkpoint` and `config` say where it came from (None for a model built in memory)."""

    name = "nmt"

    def __init__(self, model: EncoderDecoder, tokenizers: Tokenizers, normalizer: Normalizer, decode: DecodeConfig,
                 device: torch.device, autocast_dtype: torch.dtype | None = None, warn: Callable[[str], None] = warn,
                 run: Run | None = None, checkpoint: Path | None = None, config: Config | None = None,
                 members: list[tuple[Path, ModelConfig]] | None = None):
        self.model, self.tokenizers, self.normalizer, self.decode = model, tokenizers, normalizer, decode
        self.device, self.autocast_dtype, self.warn = device, autocast_dtype, warn
        self.truncations = RepeatedWarning(warn, "truncated input")
        self.run, self.checkpoint, self.config = run, checkpoint, config
        # Every model that decodes (one, or an ensemble's), by checkpoint and shape; empty for a model built here.
        self.members = members if members is not None else ([(checkpoint, config.model)] if config else [])
        self.source_lang, self.target_lang = languages(config.data) if config else ("", "")
        self._continuations: torch.Tensor | None = None  # made at the first constrained translation
        self.trim_heap = heap_trimmer_for(device)  # a long-lived server meets every shape: nmt.cpu_memory

    @classmethod
    def from_run(cls, run_dir: Path | None = None, checkpoint: Path | None = None, device: str = "auto",
                 decode_overrides: dict | None = None, warn: Callable[[str], None] = warn,
                 ensemble: Sequence[Path] = ()) -> "Translator":
        """The model of a run (its best checkpoint, else its last, or `checkpoint`) with the run's own tokenizer and
        normalization. `decode_overrides` (e.g. {"beam_size": 1}) replace the run's decode settings for this
        translator only. `ensemble`: more models (run directories or checkpoint files) that decode together with
        this one, their probabilities averaged at every step (nmt.models.ensemble); the first run's tokenizer,
        normalization and decode settings serve them all, so they must share them."""
        run = Run.of_checkpoint(run_dir, checkpoint)
        first = _Member.load(run, checkpoint, warn)
        members = [first] + [first.check_joins(_Member.load(*_member_run(p), warn), p) for p in ensemble]
        model = first.model if len(members) == 1 else Ensemble([m.model for m in members])
        decode = with_overrides(first.config.decode, decode_overrides)
        check_overrides_fit_positions(decode, decode_overrides, model.max_target_positions)
        torch_device = pick_device(device)
        model.to(torch_device).eval()
        dtype = autocast_dtype(decode.precision, torch_device)
        if emulated_bf16(torch_device, dtype):
            warn(f"decode.precision bf16 is {EMULATED_BF16_NOTE}")
        return cls(model, first.tokenizers, first.normalizer, decode, torch_device, dtype, warn, run=run,
                   checkpoint=first.checkpoint, config=first.config,
                   members=[(m.checkpoint, m.config.model) for m in members])

    @property
    def eval_dir(self) -> Path | None:
        return self.run.eval_dir if self.run else None

    @property
    def trained_on(self) -> Path | None:
        return self.run.prepared_data() if self.run else None

    @property
    def checkpoint_label(self) -> str | None:
        """The checkpoint's name when it is not the one its run translates with by default (`nmt evaluate
        --checkpoint last`), else None: a report of another checkpoint then sits beside the default's."""
        if self.run is None or self.checkpoint is None:
            return None
        try:
            default, _ = self.run.find_checkpoint()
        except NMTError:  # the run has no checkpoint of its own to be the default
            return Path(self.checkpoint).stem
        return None if default.resolve() == Path(self.checkpoint).resolve() else Path(self.checkpoint).stem

    @property
    def has_attention(self) -> bool:
        return self.model.has_attention

    @property
    def attention_layers_heads(self) -> tuple[int, int]:
        return self.model.attention_layers_heads

    @property
    def max_target_positions(self) -> int | None:
        return self.model.max_target_positions

    def check_attention_choice(self, choice: AttentionChoice) -> None:
        self.model.check_attention_choice(choice)

    def describe(self) -> dict:
        """What `/health` and reports say about this engine."""
        return {"engine": self.name, "source_lang": self.source_lang, "target_lang": self.target_lang,
                "architecture": "+".join(type(m).__name__.lower() for m in _models_of(self.model)),
                "checkpoint": str(self.checkpoint) if self.checkpoint else None, "device": str(self.device),
                "precision": "fp32" if self.autocast_dtype is None else str(self.autocast_dtype).split(".")[-1],
                **({"ensemble": [str(path) for path, _ in self.members]} if len(self.members) > 1 else {})}

    def count_pieces(self, sentence: str, prefix: str | None = None) -> int:
        return count_pieces(self.tokenizers, self.normalizer, self.decode, sentence, prefix)

    def _sentences_that_fit(self, source_len: int, decode: DecodeConfig, n_best: int = 1, prefix_len: int = 0,
                            constraint_len: int = 0) -> int:
        """decode.batch_size, or fewer sentences when their rows (beam_size each; n_best draws when sampling) would
        not fit in memory; an error when not even one sentence's rows fit. The search's steps: the length limit, or
        the longest prefix and its EOS where that is longer, and the pieces of the constraints (as the search's own
        limit)."""
        if not self.members:
            return decode.batch_size
        per_sentence = n_best if decode.samples else decode.beam_size
        steps = max(int(decode.max_len_a * source_len) + decode.max_len_b, prefix_len + 1) + constraint_len
        vocab = self.tokenizers.target.get_piece_size()
        row = sum(decode_row_bytes(shape, vocab, source_len, steps) for _, shape in self.members)
        rows = decode_rows_that_fit(row, self.device)
        if rows < per_sentence:
            what = f"{n_best} draws" if decode.samples else f"beam {decode.beam_size}"
            raise NMTError(f"decoding at {what} needs at least {row * per_sentence / 2**30:,.2f} GiB per sentence "
                           f"of {source_len} pieces but {self.device.type} has {2 * rows * row / 2**30:,.2f} GiB "
                           f"available: use a smaller {'--n-best' if decode.samples else '--beam'}")
        return max(1, min(decode.batch_size, rows // per_sentence))

    def _encode(self, sentence: str) -> tuple[list[int], bool]:
        return encode_source(self.tokenizers, self.normalizer, sentence, self.decode.max_input_tokens,
                             self.truncations)

    def translate(self, sentences: list[str], beam_size: int | None = None,
                  attention: AttentionChoice | None = None, n_best: int = 1,
                  cancelled: Callable[[], bool] | None = None,
                  prefixes: Sequence[str | None] | None = None, decode: DecodeConfig | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[Translation]:
        """Translate in length-sorted batches (less padding) and return results in input order.

        With `attention`, each result also carries that source attention and the pieces that label its axes; with
        `n_best` (at most the beam size), the n best hypotheses of each sentence and their scores. `cancelled`
        is asked at every decoding step (a server's client may have gone): True raises SearchCancelled.
        `prefixes` (one per sentence; None or "" for none): the start of each translation, given in the target
        language and continued by the search (interactive translation; CTranslate2's target_prefix). `decode`
        replaces the translator's settings for this call (a server's request of its own), `beam_size` its beam.
        `constraints` (one list per sentence, maybe empty): target-language phrases its translation must hold, in
        any order (beam search; nmt/constrained_search.py); a sentence whose beams met them nowhere within the
        length limit is translated without them, and said.
        """
        decode = decode or self.decode
        decode = decode if beam_size is None else dataclasses.replace(decode, beam_size=beam_size)
        check_n_best(n_best, decode)
        norm = LengthNormalization.from_config(decode)
        if attention is not None:
            if not self.model.has_attention:
                attention = None
            else:
                self.model.check_attention_choice(attention)
        forced = encode_prefixes(self.tokenizers, self.normalizer, prefixes, len(sentences))
        check_target_room(forced, self.max_target_positions, "prefix")
        phrases = checked_constraints(self, constraints, len(sentences), forced, decode)
        read = [self._encode(s) for s in sentences]  # (ids, whether cut) per sentence
        encoded, cut = [ids for ids, _ in read], [was_cut for _, was_cut in read]
        results: list[Translation | None] = [None] * len(sentences)
        for i, ids in enumerate(encoded):
            if not ids:  # empty or whitespace-only input keeps its line, untranslated
                results[i] = Translation(sentences[i], "", [], [])
        order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
        batch_size = self._sentences_that_fit(max((len(encoded[i]) for i in order), default=0) + 1, decode, n_best,
                                              max(map(len, forced), default=0) if forced else 0,
                                              max(map(sum_of_lengths, phrases), default=0) if phrases else 0)
        unmet = []  # sentences whose beams met their constraints nowhere
        self.model.eval()
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            prefix = prefix_batch([forced[i] for i in chunk]) if forced else None
            held = ConstraintBatch.of([phrases[i] for i in chunk], self.device, self._word_continuations()) \
                if phrases else None
            with autocast(self.device, self.autocast_dtype):
                hyps = search(self.model, source_batch([encoded[i] for i in chunk]).to(self.device), decode,
                              attention, n_best, cancelled, None if prefix is None else prefix.to(self.device), held)
            for j, (i, ranked) in enumerate(zip(chunk, hyps.ranked())):
                if ranked[0][1] == float("-inf"):
                    unmet.append(i)
                    continue
                weights = hyps.attention[j] if attention is not None else None
                results[i] = self._translation(sentences[i], encoded[i], cut[i], ranked, hyps.tokens[j], weights,
                                               norm, greedy=decode.beam_size == 1)
            self.trim_heap()  # the search's freed cache and logits go back to the OS once they add up
        if unmet:
            self.warn(f"{len(unmet)} sentence(s) could not hold their constraints within the length limit (e.g. "
                      f"{sentences[unmet[0]][:40]!r}): translated without them")
            again = self.translate([sentences[i] for i in unmet], beam_size, attention, n_best, cancelled,
                                   [prefixes[i] for i in unmet] if forced else None, decode)
            for i, translation in zip(unmet, again):
                results[i] = translation
        return results  # type: ignore[return-value]

    def _translation(self, sentence: str, source_ids: list[int], cut: bool, ranked: list, target_ids: list[int],
                     weights: torch.Tensor | None, norm: LengthNormalization, greedy: bool) -> Translation:
        """One sentence's result from its ranked hypotheses (the best's `target_ids`); with attention `weights`, the
        pieces that label the heatmap's axes too."""
        hypotheses = [self._hypothesis(pieces, score, norm, greedy) for pieces, score in ranked]
        result = Translation(sentence, hypotheses[0].text, [], [], hypotheses=hypotheses, source_cut=cut)
        if weights is not None:
            result.source_pieces = [self.tokenizers.source.id_to_piece(t) for t in source_ids] + ["</s>"]
            result.target_pieces = [self.tokenizers.target.id_to_piece(t) for t in target_ids] + ["</s>"]
            result.attention = weights[:, :len(source_ids) + 1]
        return result

    def _word_continuations(self) -> torch.Tensor | None:
        """The target pieces that glue onto a constraint phrase's last word (nmt.constrained_search); None for a
        target written without spaces, where any piece may follow a word."""
        if base_language(self.target_lang) in UNSPACED:
            return None
        if self._continuations is None:
            target = self.tokenizers.target
            self._continuations = word_continuations([target.id_to_piece(i) for i in range(target.get_piece_size())])
        return self._continuations

    def _hypothesis(self, tokens: list[int], score: float, norm: LengthNormalization, greedy: bool) -> Hypothesis:
        """Greedy search scores the log-probability, beam search its normalized form: each gives the other."""
        penalty = norm.penalty(len(tokens) + 1)  # EOS counts, as in the search
        log_prob, score = (score, score / penalty) if greedy else (score * penalty, score)
        # Byte fallback can emit line breaks or control bytes: one output line per input line, always.
        return Hypothesis(self.normalizer.clean(self.tokenizers.target.decode(tokens)), score, log_prob,
                          len(tokens) + 1)

    def score(self, sources: list[str], targets: list[str], positions_per_batch: int = 4096) -> list[Hypothesis]:
        """The model's log-probability of each target given its source (teacher forcing, no search), in input order,
        with the score beam search would give it. Both sides are normalized and tokenized as the training pairs
        were; targets are never cut: one longer than the model's position table holds is refused (TargetTooLong).

        Batches hold about `positions_per_batch` target positions (their (N, V) log-probabilities at once)."""
        if len(sources) != len(targets):
            raise NMTError(f"{len(sources)} sources but {len(targets)} targets: score takes pairs")
        norm = LengthNormalization.from_config(self.decode)
        encoded = [(self._encode(s)[0], self.tokenizers.target.encode(self.normalizer.target(t), out_type=int))
                   for s, t in zip(sources, targets)]
        check_target_room([t for _, t in encoded], self.max_target_positions, "target")
        order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i][1]), len(encoded[i][0])))
        results: list[Hypothesis | None] = [None] * len(encoded)
        self.model.eval()
        for start, end in runs_within([len(encoded[i][1]) + 1 for i in order], positions_per_batch):
            chunk = order[start:end]
            log_probs = self._forced_log_probs([encoded[i][0] for i in chunk], [encoded[i][1] for i in chunk])
            for i, log_prob in zip(chunk, log_probs.tolist()):
                pieces = len(encoded[i][1]) + 1
                results[i] = Hypothesis(targets[i], log_prob / norm.penalty(pieces), log_prob, pieces)
            self.trim_heap()
        return results  # type: ignore[return-value]

    @torch.no_grad()
    def _forced_log_probs(self, sources: list[list[int]], targets: list[list[int]]) -> torch.Tensor:
        """(B,) the summed log-probabilities of targets + EOS, each after BOS and its prefix."""
        lengths = np.array([len(t) for t in targets], dtype=np.int64)
        flat = np.fromiter(itertools.chain.from_iterable(targets), dtype=np.int64, count=int(lengths.sum()))
        tgt_in = torch.from_numpy(padded(flat, lengths, BOS_ID, None)).to(self.device)
        tgt_out = torch.from_numpy(padded(flat, lengths, None, EOS_ID)).to(self.device)
        keep = tgt_out.ne(PAD_ID)
        with autocast(self.device, self.autocast_dtype):
            logits = self.model(source_batch(sources).to(self.device), tgt_in, keep=keep)  # (N, V) at kept positions
        token_log_probs = as_log_probs(self.model, logits).gather(1, tgt_out[keep].unsqueeze(1)).squeeze(1)
        rows = torch.arange(len(targets), device=self.device).unsqueeze(1).expand_as(keep)[keep]
        return torch.zeros(len(targets), device=self.device).index_add_(0, rows, token_log_probs).cpu()


def prefix_batch(prefixes: list[list[int]]) -> torch.Tensor | None:
    """(B, P) piece ids padded with PAD (search's prefix form), or None when no row has any."""
    width = max(map(len, prefixes), default=0)
    if width == 0:
        return None
    batch = torch.full((len(prefixes), width), PAD_ID, dtype=torch.long)
    for row, ids in zip(batch, prefixes):
        row[:len(ids)] = torch.tensor(ids, dtype=torch.long)
    return batch


def runs_within(lengths: list[int], budget: int) -> list[tuple[int, int]]:
    """(start, end) runs of ascending `lengths` whose padded size, rows × the run's longest, stays within `budget`
    (a single row may pass it)."""
    runs, start = [], 0
    for i in range(1, len(lengths)):
        if (i - start + 1) * lengths[i] > budget:
            runs.append((start, i))
            start = i
    return runs + [(start, len(lengths))] if lengths else runs


def decode_row_bytes(model_cfg, vocab: int, source_len: int, steps: int) -> int:
    """The least one hypothesis row of a decoding batch holds: a few vocabulary-sized score vectors, and a state (or
    key/value cache) per layer over the source and the output so far."""
    width = model_cfg.embed_dim if model_cfg.arch == "transformer" else max(model_cfg.embed_dim, model_cfg.hidden_size)
    return 4 * 4 * vocab + 4 * 2 * width * model_cfg.num_layers * (source_len + steps)


@dataclass
class _Member:
    """One trained model of a translator with what it was trained with."""

    model: EncoderDecoder
    checkpoint: Path
    config: Config
    tokenizers: Tokenizers
    normalizer: Normalizer
    run: Run

    @classmethod
    def load(cls, run: Run, checkpoint: Path | None, warn: Callable[[str], None]) -> "_Member":
        path, notice = run.choose_checkpoint(checkpoint)
        if notice:
            warn(notice)
        cfg, tokenizers = run.read_config(), run.tokenizers()
        weights = run.load_weights(path)
        run.check_translatable(weights, cfg, tokenizers, path)
        return cls(_model_for(weights, cfg, tokenizers, path), path, cfg, tokenizers, run.read_normalizer(), run)

    def check_joins(self, other: "_Member", given: Path) -> "_Member":
        """`other` when it can decode beside this member: the same language pair, pieces and normalization (it
        reads the ids this member's tokenizer makes, and its output pieces are read back with that tokenizer)."""
        if other.checkpoint.resolve() == self.checkpoint.resolve():
            raise NMTError(f"--ensemble {given}: {other.checkpoint} is in the ensemble already")
        first, second = languages(self.config.data), languages(other.config.data)
        if first != second:
            raise NMTError(f"--ensemble {given} translates {'→'.join(second)} but {self.run.directory} "
                           f"{'→'.join(first)}: an ensemble's members translate one pair in one direction")
        if not same_vocabulary(self.tokenizers, other.tokenizers):
            raise NMTError(f"--ensemble {given} was trained with another SentencePiece model than "
                           f"{self.run.directory}: an ensemble's members must share one (train them on the same "
                           "prepared data: same data settings, any model or seed)")
        if other.normalizer != self.normalizer:
            raise NMTError(f"--ensemble {given} normalizes text otherwise than {self.run.directory} "
                           f"({other.run.normalizer_path} differs): its members must read the same input")
        return other


def _models_of(model: EncoderDecoder) -> list[EncoderDecoder]:
    return list(model.members) if isinstance(model, Ensemble) else [model]


def _member_run(given: Path) -> tuple[Run, Path | None]:
    """An --ensemble argument: a run directory (with the checkpoint it would translate with) or a checkpoint file
    in a run's checkpoints/ folder."""
    given = Path(given)
    if given.is_dir():
        return Run.open(given), None
    if not given.is_file():
        raise NMTError(f"--ensemble {given}: no such run directory or checkpoint")
    return Run.of_checkpoint(None, given), given


def _model_for(weights: Weights, cfg: Config, tokenizers: Tokenizers, path: Path) -> EncoderDecoder:
    """Rebuild from the checkpoint's model_args (older checkpoints: from the run's config) and load the weights."""
    with initializers_skipped():  # every parameter is replaced by the strict load below
        if weights.model_args is not None:
            model = build_from_args(weights.model_args, cfg.model)
        else:
            model = build_model(cfg.model, tokenizers.source.get_piece_size(), tokenizers.target.get_piece_size(),
                                tokenizers.joint)
    saved_arch = weights.config.get("model", {}).get("arch")
    if saved_arch not in (None, cfg.model.arch):
        raise NMTError(f"{path} holds a {saved_arch} model, but this run is a {cfg.model.arch}")
    try:
        model.load_state_dict(upgrade_state_dict(weights.model))
    except (KeyError, RuntimeError, TypeError, AttributeError) as err:
        raise NMTError(f"{path} does not match the model in {path.parent.parent}/config.yaml: "
                       f"{str(err).splitlines()[0]}") from None
    return model
