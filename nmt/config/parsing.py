"""YAML and mappings into the typed sections: safe types only and no key given twice, each value coerced to its
field's type and held to its bounds, an unknown key answered with the name nmt gives it."""

from __future__ import annotations

import dataclasses
import difflib
import math
import reprlib
import typing
from pathlib import Path
from typing import Any

import yaml

from nmt.config.sections import INT64_MAX, Config, sections_holding
from nmt.errors import ConfigError


def to_dict(config: Any) -> dict:
    """Plain values only: safe for YAML, JSON and `torch.load(weights_only=True)`."""
    return dataclasses.asdict(config)


def from_dict(raw: Any, cls: type = Config, path: str = "") -> Any:
    """Build and validate a dataclass from a (YAML) mapping; errors carry the full dotted key."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path or 'config'} must be a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values = {}
    for key, value in raw.items():
        full = f"{path}.{key}" if path else str(key)
        if key not in fields:
            raise ConfigError(_unknown_key_message(full, str(key), fields, path, value))
        values[key] = _coerce(value, hints[key], full)
    obj = cls(**values)
    for name, f in fields.items():
        _validate_range(getattr(obj, name), f.metadata, f"{path}.{name}" if path else name)
    return obj


# What JoeyNMT, fairseq and OpenNMT-py call a setting that nmt names otherwise: a user bringing a config over is told
# nmt's name (difflib finds `max_epoch`, not `learning_rate` → `lr`). Notes say where the meaning differs; a
# section-qualified name is a peer's name in that section only (decode.batch_size is nmt's own).
_PEER_NAMES = {
    "learning_rate": "train.lr", "train.batch_size": "train.max_tokens (nmt batches by tokens)",
    # JoeyNMT's and OpenNMT-py's `batch_type: sentence|token`, fairseq's --max-sentences (its batch size in
    # sentences; difflib offered train.eval_max_sentences, how many valid sentences validation reads).
    "batch_type": "train.max_tokens (nmt batches by tokens, always)",
    "train.max_sentences": "train.max_tokens (nmt batches by tokens)",
    "decode.max_sentences": "decode.batch_size (sentences a batch, as fairseq-generate's)",
    "batch_multiplier": "train.accum_steps", "update_freq": "train.accum_steps", "accum_count": "train.accum_steps",
    "gradient_accumulation_steps": "train.accum_steps", "max_update": "train.max_steps",
    "train_steps": "train.max_steps", "epochs": "train.max_epochs", "random_seed": "train.seed",
    "validation_freq": "train.eval_every", "valid_steps": "train.eval_every",
    "validate_interval_updates": "train.eval_every", "logging_freq": "train.log_every",
    "report_every": "train.log_every", "log_interval": "train.log_every", "save_interval_updates": "train.save_every",
    "tensorboard_logdir": "train.tensorboard (true: the run's tensorboard/ folder)",
    "tensorboard_log_dir": "train.tensorboard (true: the run's tensorboard/ folder)",
    "eval_bleu_args": "train.eval_beam_size (the beam of fairseq's JSON)",
    "average_decay": "train.ema_decay (the decay: 1 minus this setting)",
    "exponential_smoothing": "train.ema_decay (the decay: 1 minus this setting)",
    "save_checkpoint_steps": "train.save_every", "keep_last_ckpts": "train.keep_last",
    "keep_checkpoint": "train.keep_last", "keep_interval_updates": "train.keep_last",
    "clip_grad_norm": "train.clip_norm", "max_grad_norm": "train.clip_norm",
    "early_stopping_metric": "train.best_metric", "warmup_updates": "train.warmup_steps",
    "learning_rate_warmup": "train.warmup_steps", "scheduling": "train.schedule", "lr_scheduler": "train.schedule",
    "decay_method": "train.schedule", "use_cuda": "train.device", "fp16": "train.precision",
    "amp": "train.precision", "embedding_dim": "model.embed_dim", "encoder_embed_dim": "model.embed_dim",
    "word_vec_size": "model.embed_dim", "ff_size": "model.ff_dim", "encoder_ffn_embed_dim": "model.ff_dim",
    "transformer_ff": "model.ff_dim", "encoder_layers": "model.num_layers", "layers": "model.num_layers",
    "encoder_attention_heads": "model.num_heads", "heads": "model.num_heads", "rnn_size": "model.hidden_size",
    "tied_embeddings": "model.tie_embeddings", "share_all_embeddings": "model.tie_embeddings",
    "share_embeddings": "model.tie_embeddings", "layer_norm": "model.pre_norm", "beam": "decode.beam_size",
    "alpha": "decode.length_penalty", "lenpen": "decode.length_penalty", "temperature": "decode.sampling_temperature",
    "voc_limit": "data.vocab_size", "src_vocab_size": "data.vocab_size", "max_length": "data.max_pieces",
    "src_lang": "data.source_lang", "trg_lang": "data.target_lang", "tgt_lang": "data.target_lang",
    "lowercase": "data.lowercase_source and data.lowercase_target", "testing": "decode",
    # Where difflib's nearest name meant something else (train.shuffle → schedule, decode.max_output_length →
    # max_input_tokens, data.src_seq_length → source_lang, data.joint_dictionary → join_punctuation_target).
    "max_output_length": "decode.max_len_a and decode.max_len_b (at most a · source length + b pieces)",
    **dict.fromkeys(("max_sent_length", "src_seq_length", "tgt_seq_length"),
                    "data.max_words (or data.max_pieces, in subword pieces)"),
    **dict.fromkeys(("joined_dictionary", "joint_dictionary", "share_vocab"), "data.joint_vocab"),
    "level": "data.tokenizer_type", "data.src": "data.source_lang", "data.trg": "data.target_lang",
    "data.tgt": "data.target_lang", "data.train": "data.source_file and data.target_file",
    **dict.fromkeys(("data.dev", "data.valid"), "data.valid_source_file and data.valid_target_file"),
    "data.test": "data.test_source_file and data.test_target_file",
    "decoder_layers": "model.num_layers (the encoder's and the decoder's)",
    "decoder_attention_heads": "model.num_heads",
    **dict.fromkeys(("encoder_normalize_before", "decoder_normalize_before"), "model.pre_norm"),
    "initializer": "model.init", "tied_softmax": "model.tie_embeddings",
    "rnn_type": "model.arch (luong: LSTMs; bahdanau and seq2seq: GRUs)", "bf16": "train.precision",
    "load_model": "train.init_from", "block_ngram_repeat": "decode.no_repeat_ngram_size",
    **dict.fromkeys(("topk", "random_sampling_topk"), "decode.sampling_topk"),
    **dict.fromkeys(("topp", "random_sampling_topp"), "decode.sampling_topp"),
    "random_sampling_temp": "decode.sampling_temperature",
}

# A peer's setting that nmt has no setting for, and what stands in for it.
_NO_SETTING = {
    "shuffle": "training pairs are shuffled every epoch, in an order drawn from train.seed",
    "warmup_init_lr": "the warm-up starts from 0 and lasts train.warmup_steps",
    **dict.fromkeys(("model_dir", "save_dir"),
                    "the run directory is given on the command line: nmt train --run-dir DIR"),
    **dict.fromkeys(("nbest", "n_best"), "n-best lists are asked for on the command line: nmt translate --n-best N"),
}


def _unknown_key_message(full: str, key: str, fields: dict, path: str, value: Any = None) -> str:
    peer = _PEER_NAMES.get(full) or _PEER_NAMES.get(key)
    if peer:
        return f"unknown key {full}; did you mean {peer}? (nmt's name for it)"
    if key in _NO_SETTING:
        return f"unknown key {full}: nmt has no such setting; {_NO_SETTING[key]}"
    # A setting written outside its section (`--set lr=1e-3`, `train.beam_size: 5`) is named where it lives.
    home = [section for section in sections_holding(key) if section != path]
    if home:
        return f"unknown key {full}; did you mean {home[0]}.{key}?"
    close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
    if close:
        return f"unknown key {full}; did you mean {path + '.' if path else ''}{close[0]}?"
    holds_anchors = not path and isinstance(value, dict)  # settings to merge elsewhere (`<<: *small`)
    anchors = f" (a key that holds YAML anchors: name it {ANCHORS_PREFIX}{key})" if holds_anchors else ""
    return f"unknown key {full}; valid keys: {', '.join(fields)}{anchors}"


# A top-level key of this prefix holds YAML anchors that sections merge (`x-small: &small {...}`, then
# `model: {<<: *small}`), as docker-compose's extension fields do: it names no section and is dropped after reading.
ANCHORS_PREFIX = "x-"


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 4
_SHOWN.maxlevel = 2


def _shown(value: Any) -> str:
    """A value as an error shows it: its repr, cut short. An alias bomb's list (nine of the one before, eight deep,
    read at once as shared references) made a message of 254 MB; a setting of 5 MB of text, one of 5 MB."""
    try:
        return _SHOWN.repr(value)
    except ValueError:  # an int past Python's 4,300 digits (from code: YAML's are refused as read)
        return f"an integer of {value.bit_length():,} bits"


def _as_number(value: Any) -> float | None:
    """The number a YAML value spells, or None; PyYAML reads "3e-4" as a string (YAML 1.1), so numeric strings count."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _coerce(value: Any, typ: Any, path: str) -> Any:
    args = typing.get_args(typ)
    if type(None) in args:  # `X | None`: null means "the default of the context"
        if value is None:
            return None
        typ = next(a for a in args if a is not type(None))
    if dataclasses.is_dataclass(typ):
        return from_dict(value if value is not None else {}, typ, path)
    if typ is bool:
        if isinstance(value, bool):
            return value
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        # "max_steps: 1e5" is a string to PyYAML and 1.0e5 a float: either is a whole number the user meant.
        number = _as_number(value)
        if number is not None and math.isfinite(number) and number.is_integer():
            return int(number)
    elif typ is float:
        number = _as_number(value)
        if number is not None:
            if not math.isfinite(number):  # YAML's .inf/.nan, or "inf": no setting means infinity
                raise ConfigError(f"{path} must be a finite number, got {_shown(value)}")
            return number
    elif typ is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{path} must be {typ.__name__}, got {_shown(value)} ({type(value).__name__})")


def _validate_range(value: Any, rules: Any, path: str) -> None:
    if value is None:  # an unset optional setting: nothing to check
        return
    if "choices" in rules and value not in rules["choices"]:
        raise ConfigError(f"{path} must be one of {', '.join(rules['choices'])}; got {_shown(value)}")
    if isinstance(value, int) and not isinstance(value, bool):
        # Every integer setting reaches torch, numpy or C code as 64 bits (a seed, a slice's end): past them, an
        # internal error far from the setting's name.
        rules = {"ge": -INT64_MAX - 1, "le": INT64_MAX, **rules}
    checks = {"gt": (lambda v, b: v > b, ">"), "ge": (lambda v, b: v >= b, ">="),
              "lt": (lambda v, b: v < b, "<"), "le": (lambda v, b: v <= b, "<=")}
    for rule, (ok, symbol) in checks.items():
        if rule in rules and not ok(value, rules[rule]):
            raise ConfigError(f"{path} must be {symbol} {rules[rule]}; got {_shown(value)}")


class UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice (plain YAML silently keeps the last one). A merge key (`<<: *shared`)
    is no key of its own: SafeLoader merges it, a key written beside it overriding the merged one, as YAML says."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ConfigError(f"duplicate key {key!r} (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        """A plain integer, or a one-line error for one of more digits than Python reads as an int (4,300: its
        ValueError was an internal error)."""
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise ConfigError(f"line {node.start_mark.line + 1}: a number of {len(node.value):,} digits, past any "
                              "setting's (64 bits at most)") from None
UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", UniqueKeyLoader.construct_yaml_int)


def read_yaml(path: Path) -> Any:
    """One YAML document with safe types only and no duplicate keys; every failure is a one-line ConfigError."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    except yaml.MarkedYAMLError as err:
        # Where and what: "invalid YAML (while scanning for the next token)" named neither the line nor the tab.
        mark = err.problem_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = err.problem or "parse error"
        raise ConfigError(f"{path}{where}: invalid YAML: {what}" + (f" ({err.context})" if err.context else "")) \
            from None
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else "parse error"
        raise ConfigError(f"{path}: invalid YAML ({first})") from None
