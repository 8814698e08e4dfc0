"""The CTranslate2 engine: text → text with an `nmt export` directory, behind the same interface as `Translator`.

The export carries the run's whole `DecodeConfig` (nmt_export.json), so the settings a run was trained and chosen
with travel to this engine too. What CTranslate2 cannot do is said once, at load time, and the settings it actually
decodes with (`decode`) are what reports and `/health` record:
- `length_normalization: wu` has no CTranslate2 equivalent (it divides by |Y|^α, fairseq's rule): refused;
- sampling (`sampling_topk` other than 1) uses CTranslate2's sampler with the same top-k, top-p and temperature;
  its seed (`ctranslate2.set_random_seed`) is set once, at load, and its generators live as long as the process:
  the same command gives the same draws, but a server draws anew for a repeated request (nmt's engine restarts its
  generator at every call);
- `patient_stop`: CTranslate2 closes a sentence once beam_size hypotheses have ended (its patience factor 1), which
  is nmt's rule without the patient stop: decoded as `patient_stop: false`, with a warning.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, Sequence

from nmt.config import Config, DataConfig, DecodeConfig, check_n_best
from nmt.data.normalizer import Normalizer
from nmt.data.tokenizer import Tokenizers, is_utf8_name
from nmt.engine_inputs import (check_overrides_fit_positions, check_target_room, count_pieces, encode_prefixes,
                               encode_source, with_overrides)
from nmt.errors import NMTError, RepeatedWarning, environment_settings
from nmt.models.base import AttentionChoice
from nmt.run_dir import EXPORT_METADATA, Run
from nmt.search import SearchCancelled
from nmt.translator import Hypothesis, Translation

INSTALL_HINT = "pip install 'nmt[export]' (or pip install ctranslate2)"
# DecodeConfig.precision → CTranslate2 compute type ("default" keeps the export's own quantization).
COMPUTE_TYPES = {"auto": "default", "fp32": "float32", "bf16": "bfloat16"}


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise NMTError(f"CTranslate2 is not installed: {INSTALL_HINT}") from None
    return ctranslate2


def read_export_metadata(model_dir: Path) -> dict:
    """nmt_export.json of an export directory, checked: a clear error for anything that is not one."""
    path = Path(model_dir) / EXPORT_METADATA
    if not (Path(model_dir) / "model.bin").is_file() or not path.is_file():
        if Run(Path(model_dir)).config_path.is_file():
            raise NMTError(f"{model_dir} is a run, not a CTranslate2 export: use it with --run {model_dir} (the nmt "
                           f"engine), or export it first with `nmt export --run {model_dir} -o DIR`")
        raise NMTError(f"{model_dir} is not an nmt CTranslate2 export (no model.bin or {EXPORT_METADATA}); "
                       "run `nmt export` first")
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
        decode = DecodeConfig(**metadata["decode"])
        positions = metadata.get("max_target_positions")
        if positions is not None and (type(positions) is not int or positions < 1):
            raise ValueError(f"max_target_positions {positions!r} is not a positive integer")
    except (ValueError, KeyError, TypeError) as err:
        raise NMTError(f"{path} is damaged or from another version ({type(err).__name__}: {err}); "
                       "export the run again") from None
    return {**metadata, "decode": decode}


def data_only_config(data: dict | None) -> Config | None:
    """The run's data settings kept in the export (to find its prepared test split); None for older exports."""
    if not isinstance(data, dict):
        return None
    known = {f.name for f in dataclasses.fields(DataConfig)}
    return Config(data=DataConfig(**{k: v for k, v in data.items() if k in known}))


def effective_decode(decode: DecodeConfig) -> tuple[DecodeConfig, list[str]]:
    """The settings CTranslate2 will really decode with (see the module docstring), and what changed."""
    if decode.length_normalization != "fairseq":
        raise NMTError(f"this export decodes with decode.length_normalization {decode.length_normalization}; "
                       "CTranslate2 only normalizes by |Y|^alpha (fairseq): re-export a run with "
                       "length_normalization fairseq, or use the nmt engine")
    if decode.patient_stop:
        # One hypothesis (greedy, sampling) ends the sentence either way: only a beam decodes differently.
        notes = ["CTranslate2 has no patient stop: a sentence ends once beam_size hypotheses have ended (decoding "
                 "with patient_stop false)"] if decode.beam_size > 1 else []
        return dataclasses.replace(decode, patient_stop=False), notes
    return decode, []


# CTranslate2 divides float32 logits by the temperature as they are: near float32's smallest numbers they overflow
# to +-inf and the sampler draws from NaN (at 1e-40 every piece came out <blank>; 1e-37 still decoded). At 1e-30 a
# gap over 1e-28 between the two most probable pieces already makes the draw the arg-max, as colder would.
COLDEST_TEMPERATURE = 1e-30


# CTranslate2 takes top-p as float32 and refuses it once that is 0; below the smallest normal float32 the set whose
# probability reaches it is the arg-max alone, as it is for any top-p that small.
SMALLEST_TOP_P = 2.0**-126  # float32's smallest normal number


def translate_options(decode: DecodeConfig, longest_source: int, vocabulary: int) -> dict:
    """`Translator.translate_batch` keyword arguments for `decode` (longest_source: pieces + EOS of the batch;
    vocabulary: the target's pieces). A top-k past the vocabulary is all of it (0), as in nmt's sampler: CTranslate2
    refused it ("greater than the vocabulary size", an internal error)."""
    top_k = 0 if decode.sampling_topk >= vocabulary else decode.sampling_topk
    sampling = {"sampling_topk": top_k, "sampling_topp": max(decode.sampling_topp, SMALLEST_TOP_P),
                "sampling_temperature": max(decode.sampling_temperature, COLDEST_TEMPERATURE)} if decode.samples else {}
    return {"beam_size": decode.beam_size, "length_penalty": decode.length_penalty, "patience": 1.0,
            "no_repeat_ngram_size": decode.no_repeat_ngram_size,
            "max_batch_size": decode.batch_size, "batch_type": "examples",
            "max_input_length": decode.max_input_tokens,
            "max_decoding_length": int(decode.max_len_a * longest_source) + decode.max_len_b, **sampling}


def _from_scoring(text: str, scored, alpha: float) -> Hypothesis:
    """A Hypothesis from `score_batch`'s result for it: one log-probability per target piece, EOS included."""
    log_prob, pieces = sum(scored.log_probs), len(scored.log_probs)
    return Hypothesis(text, log_prob / pieces ** alpha, log_prob, pieces)


def _best_first(pairs) -> list[tuple]:
    """(pieces, Hypothesis) pairs by score, best first (stable: a beam's own order stands among equals)."""
    return sorted(pairs, key=lambda pair: -pair[1].score)


class CTranslate2Engine:
    """An export directory as an engine: the same normalization, SentencePiece and length limits as `Translator`."""

    name = "ctranslate2"
    checkpoint_label = None  # an export is one checkpoint: its reports are named by the engine
    has_attention = False
    attention_layers_heads = (0, 0)

    def __init__(self, model_dir: Path, device: str = "cpu", threads: int = 0, decode_overrides: dict | None = None,
                 warn: Callable[[str], None] | None = None):
        self.model_dir = Path(model_dir)
        self.warn = warn or (lambda message: None)
        self.truncations = RepeatedWarning(self.warn, "truncated input")
        metadata = read_export_metadata(self.model_dir)  # a wrong directory is named before ctranslate2 is needed
        ctranslate2 = import_ctranslate2()
        self.decode, notes = effective_decode(with_overrides(metadata["decode"], decode_overrides))
        self.checkpoint = metadata.get("checkpoint")
        self.config = data_only_config(metadata.get("data"))
        self.trained_on = Path(metadata["prepared_data"]) if isinstance(metadata.get("prepared_data"), str) else None
        self.source_lang, self.target_lang = metadata.get("languages") or ("", "")
        self.eval_dir = self.model_dir / "eval"
        self.quantization = metadata.get("quantization")
        # None in exports made before nmt recorded it: CTranslate2's own error then says what is too long.
        self.max_target_positions = metadata.get("max_target_positions")
        check_overrides_fit_positions(self.decode, decode_overrides, self.max_target_positions)
        try:
            self.tokenizers = Tokenizers.from_dir(self.model_dir)
            self.normalizer = Normalizer(**json.loads((self.model_dir / "normalizer.json").read_text("utf-8")))
        except (OSError, ValueError, TypeError, RuntimeError) as err:
            raise NMTError(f"{self.model_dir}: the tokenizer or normalizer.json is missing or damaged "
                           f"({type(err).__name__}); export the run again") from None
        gpus = ctranslate2.get_cuda_device_count()
        if device == "cuda" and gpus == 0:
            raise NMTError("--device cuda was requested but CTranslate2 sees no CUDA device (use cpu or auto)")
        if device not in ("auto", "cpu", "cuda"):
            raise NMTError(f"unknown device {device!r} for CTranslate2: use auto, cpu or cuda")
        self.device = "cuda" if device == "cuda" or (device == "auto" and gpus) else "cpu"
        if self.decode.samples:  # before the first draw: each thread's generator starts from it
            ctranslate2.set_random_seed(self.decode.sampling_seed)
        if not is_utf8_name(self.model_dir):
            raise NMTError(f"CTranslate2 takes a model folder's name only as UTF-8: rename {self.model_dir}")
        try:
            self.engine = ctranslate2.Translator(str(self.model_dir), device=self.device,
                                                 compute_type=COMPUTE_TYPES[self.decode.precision],
                                                 intra_threads=threads)
        except (RuntimeError, ValueError) as err:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            if settings := environment_settings(("CT2_",)):  # CT2_VERBOSE=abc failed here as "stoi", not the model
                raise NMTError(f"CTranslate2 cannot load {self.model_dir}/model.bin with its settings from the "
                               f"environment ({settings}): {reason}; correct or unset them") from None
            raise NMTError(f"{self.model_dir}/model.bin cannot be loaded by CTranslate2: {reason}") from None
        for note in notes:  # said once the engine is known to work
            self.warn(note)

    def describe(self) -> dict:
        return {"engine": self.name, "source_lang": self.source_lang, "target_lang": self.target_lang,
                "architecture": "transformer", "checkpoint": self.checkpoint,
                "model": str(self.model_dir), "quantization": self.quantization, "device": self.device,
                "precision": COMPUTE_TYPES[self.decode.precision]}

    def check_attention_choice(self, choice: AttentionChoice) -> None:
        pass  # no attention to choose from: requests for it get translations without a matrix

    def _pieces(self, sentence: str) -> tuple[list[str], bool]:
        return encode_source(self.tokenizers, self.normalizer, sentence, self.decode.max_input_tokens,
                             self.truncations, str)

    def count_pieces(self, sentence: str, prefix: str | None = None) -> int:
        return count_pieces(self.tokenizers, self.normalizer, self.decode, sentence, prefix)

    def translate(self, sentences: list[str], beam_size: int | None = None,
                  attention: AttentionChoice | None = None, n_best: int = 1,
                  cancelled: Callable[[], bool] | None = None,
                  prefixes: Sequence[str | None] | None = None, decode: DecodeConfig | None = None,
                  constraints: Sequence[Sequence[str]] | None = None) -> list[Translation]:
        """As `Translator.translate`, without lexical constraints; `cancelled` is asked once, before decoding:
        CTranslate2 decodes a batch in one call that cannot be stopped part way. `decode` may change what
        CTranslate2 follows per call (beam, length penalty, no-repeat, the sampler), not what `effective_decode`
        settled at load."""
        if constraints is not None and any(constraints):
            raise NMTError("CTranslate2 has no lexically constrained search: constraints need the nmt engine "
                           "(--run or --checkpoint)")
        if cancelled is not None and cancelled():
            raise SearchCancelled()
        decode = decode or self.decode
        decode = decode if beam_size is None else dataclasses.replace(decode, beam_size=beam_size)
        check_n_best(n_best, decode)
        if decode.samples and decode.sampling_seed != self.decode.sampling_seed:
            raise NMTError(f"CTranslate2 seeds its sampler once, at load (seed {self.decode.sampling_seed}): a seed of "
                           "its own for each call is the nmt engine's")
        read = [self._pieces(s) for s in sentences]  # (pieces, whether cut) per sentence
        pieces = [p for p, _ in read]
        results = [Translation(s, "", p, [], source_cut=was_cut) for s, (p, was_cut) in zip(sentences, read)]
        todo = [i for i, p in enumerate(pieces) if p]
        forced = encode_prefixes(self.tokenizers, self.normalizer, prefixes, len(sentences), str)
        check_target_room(forced, self.max_target_positions, "prefix")
        if todo:
            options = translate_options(decode, max(len(pieces[i]) for i in todo) + 1,
                                        self.tokenizers.target.get_piece_size())
            if forced:  # as nmt's search does: room for every prefix and its EOS
                options["max_decoding_length"] = max(options["max_decoding_length"], max(map(len, forced)) + 1)
            try:
                outputs = self.engine.translate_batch([pieces[i] for i in todo], num_hypotheses=n_best,
                                                      return_scores=True, target_prefix=[forced[i] for i in todo]
                                                      if forced else None, **options)
            except RuntimeError as err:  # an older export's prefix past the position table: said as the user's
                if not forced or "position" not in str(err):
                    raise
                raise NMTError(f"the prefix is longer than this model continues (CTranslate2: {err}); export the "
                               "run again and nmt names the limit before decoding") from None
            by_sentence, limit = dict(zip(todo, outputs)), options["max_decoding_length"]
            # CTranslate2 scores a prefix's pieces out, and an output cut at the length limit without an EOS (nmt's
            # search pays EOS's price there): those are scored again, whole.
            rescored = [i for i in todo if (forced and forced[i])
                        or any(len(tokens) >= limit for tokens in by_sentence[i].hypotheses)]
            ranked = dict(zip(rescored, self._scored_whole([(pieces[i], by_sentence[i].hypotheses) for i in rescored],
                                                           decode.length_penalty)))
            ranked.update({i: _best_first((tokens, self._hypothesis(tokens, score, decode.length_penalty))
                                          for tokens, score in zip(by_sentence[i].hypotheses, by_sentence[i].scores))
                           for i in todo if i not in ranked})  # sampled draws come in no order
            for i in todo:
                results[i].target_pieces = ranked[i][0][0]
                results[i].hypotheses = [hypothesis for _, hypothesis in ranked[i]]
                results[i].text = results[i].hypotheses[0].text
        return results

    def _scored_whole(self, outputs: list[tuple[list[str], list[list[str]]]], alpha: float) -> list[list[tuple]]:
        """Per (source pieces, outputs) item: (pieces, Hypothesis) pairs best first, each with the model's own
        log-probability of the whole output, EOS included (what nmt's search and `score` give), from one
        `score_batch` over them all; the ranking follows it."""
        pairs = [(source, tokens) for source, hypotheses in outputs for tokens in hypotheses]
        scored = iter(self._score_pieces([s for s, _ in pairs], [t for _, t in pairs]) if pairs else [])
        return [_best_first((tokens, _from_scoring(self._text(tokens), next(scored), alpha)) for tokens in hypotheses)
                for _, hypotheses in outputs]

    def _score_pieces(self, sources: list[list[str]], targets: list[list[str]], positions_per_batch: int = 4096):
        try:
            return self.engine.score_batch(sources, targets, max_batch_size=positions_per_batch, batch_type="tokens",
                                           max_input_length=0)
        except (RuntimeError, ValueError) as err:
            raise NMTError(f"CTranslate2 cannot score these pairs: {str(err).splitlines()[0]}") from None

    def score(self, sources: list[str], targets: list[str], positions_per_batch: int = 4096) -> list[Hypothesis]:
        """As `Translator.score`: CTranslate2's `score_batch` gives each target piece's log-probability, EOS
        included; targets are not cut."""
        if len(sources) != len(targets):
            raise NMTError(f"{len(sources)} sources but {len(targets)} targets: score takes pairs")
        target_pieces = [self.tokenizers.target.encode(self.normalizer.target(t), out_type=str) for t in targets]
        check_target_room(target_pieces, self.max_target_positions, "target")
        scored = self._score_pieces([self._pieces(s)[0] for s in sources], target_pieces, positions_per_batch)
        return [_from_scoring(target, result, self.decode.length_penalty) for target, result in zip(targets, scored)]

    def _hypothesis(self, tokens: list[str], score: float, alpha: float) -> Hypothesis:
        """CTranslate2 scores every search (greedy too) as log-probability / (pieces + EOS) ** alpha: nmt's rule
        under `length_normalization: fairseq`, the only one it decodes with."""
        return Hypothesis(self._text(tokens), score, score * (len(tokens) + 1) ** alpha, len(tokens) + 1)

    def _text(self, tokens: list[str]) -> str:
        return self.normalizer.clean(self.tokenizers.target.decode(tokens))
