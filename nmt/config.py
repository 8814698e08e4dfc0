"""Typed configuration: YAML → dataclasses once, validated before any work starts.

Code below the CLI receives these objects (or a few of their fields), never raw dicts.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nmt.errors import ConfigError

D2L_CORPUS_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
# sha256 of fra.txt in the manythings.org release of 2019-04-07 (the d2l.ai copy); the content hash is the one
# to trust because mirrors repack the zip.
FRA_TXT_SHA256 = "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104"


def _check(**rules: Any) -> dict:
    """Field metadata read by `validate`: gt/ge/le bounds and `choices`."""
    return rules


@dataclass
class DataConfig:
    """Corpus, normalization, split and tokenizer: shared by every model config."""

    corpus_url: str = D2L_CORPUS_URL
    corpus_sha256: str = FRA_TXT_SHA256
    verify_checksum: bool = True  # False accepts another release (e.g. a newer 3-column manythings.org zip)
    lowercase_source: bool = True  # English case carries little signal here; makes "i'm home ." == "I'm home."
    max_words: int = field(default=50, metadata=_check(ge=1))  # pairs longer than this (either side) are dropped
    valid_fraction: float = field(default=0.017, metadata=_check(gt=0.0, lt=0.5))  # of distinct English sentences
    test_fraction: float = field(default=0.017, metadata=_check(gt=0.0, lt=0.5))
    split_salt: str = "nmt-split-v1"
    vocab_size: int = field(default=8000, metadata=_check(ge=64))
    joint_vocab: bool = True
    tokenizer_type: str = field(default="unigram", metadata=_check(choices=("unigram", "bpe")))
    byte_fallback: bool = True
    character_coverage: float = field(default=0.9999, metadata=_check(gt=0.0, le=1.0))


@dataclass
class ModelConfig:
    arch: str = field(default="transformer", metadata=_check(choices=("seq2seq", "bahdanau", "luong", "transformer")))
    embed_dim: int = field(default=256, metadata=_check(ge=1))  # d_model for the Transformer
    hidden_size: int = field(default=512, metadata=_check(ge=1))  # RNN state size (per direction)
    num_layers: int = field(default=2, metadata=_check(ge=1))  # per encoder and per decoder
    dropout: float = field(default=0.1, metadata=_check(ge=0.0, lt=1.0))
    # Luong only: score function, local-p window half-width D, input feeding.
    attention: str = field(default="general", metadata=_check(choices=("dot", "general", "concat", "local-p")))
    local_window: int = field(default=5, metadata=_check(ge=1))
    input_feeding: bool = False
    # Transformer only.
    num_heads: int = field(default=4, metadata=_check(ge=1))
    ff_dim: int = field(default=1024, metadata=_check(ge=1))
    pre_norm: bool = True
    tie_embeddings: bool = True  # effective only with a joint vocabulary


@dataclass
class TrainConfig:
    max_steps: int = field(default=100_000, metadata=_check(ge=1))
    max_epochs: int = field(default=100, metadata=_check(ge=1))
    seed: int = 1234
    max_tokens: int = field(default=4096, metadata=_check(ge=1))  # per micro-batch, padded tokens of the longer side
    accum_steps: int = field(default=1, metadata=_check(ge=1))
    lr: float = field(default=5e-4, metadata=_check(gt=0.0))
    schedule: str = field(default="inverse_sqrt", metadata=_check(choices=("inverse_sqrt", "plateau", "constant")))
    warmup_steps: int = field(default=4000, metadata=_check(ge=0))
    plateau_factor: float = field(default=0.5, metadata=_check(gt=0.0, lt=1.0))
    weight_decay: float = field(default=0.0001, metadata=_check(ge=0.0))
    clip_norm: float = field(default=1.0, metadata=_check(ge=0.0))  # 0 disables clipping
    label_smoothing: float = field(default=0.1, metadata=_check(ge=0.0, lt=1.0))
    eval_every: int = field(default=1000, metadata=_check(ge=1))
    eval_max_sentences: int = field(default=0, metadata=_check(ge=0))  # 0: the whole valid split
    save_every: int = field(default=1000, metadata=_check(ge=1))
    log_every: int = field(default=50, metadata=_check(ge=1))
    patience: int = field(default=10, metadata=_check(ge=1))  # evaluations without dev-BLEU gain before stopping
    device: str = field(default="auto", metadata=_check(choices=("auto", "cpu", "cuda")))
    precision: str = field(default="auto", metadata=_check(choices=("auto", "fp32", "bf16", "fp16")))
    compile: bool = False
    nonfinite_loss: str = field(default="stop", metadata=_check(choices=("stop", "skip")))
    threads: int = field(default=0, metadata=_check(ge=0))  # CPU intra-op threads; 0 leaves torch's default


@dataclass
class DecodeConfig:
    beam_size: int = field(default=5, metadata=_check(ge=1))
    length_penalty: float = field(default=1.0, metadata=_check(ge=0.0))  # alpha of Wu et al. (2016)
    max_len_a: float = field(default=1.5, metadata=_check(ge=0.0))  # max output = a * source length + b
    max_len_b: int = field(default=10, metadata=_check(ge=1))
    batch_size: int = field(default=128, metadata=_check(ge=1))  # sentences per decoding batch
    max_input_tokens: int = field(default=256, metadata=_check(ge=1))  # longer inputs are truncated with a warning


@dataclass
class Config:
    name: str = "model"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


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
            raise ConfigError(_unknown_key_message(full, str(key), fields, path))
        values[key] = _coerce(value, hints[key], full)
    obj = cls(**values)
    for name, f in fields.items():
        _validate_range(getattr(obj, name), f.metadata, f"{path}.{name}" if path else name)
    return obj


def _unknown_key_message(full: str, key: str, fields: dict, path: str) -> str:
    close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
    if close:
        return f"unknown key {full}; did you mean {path + '.' if path else ''}{close[0]}?"
    return f"unknown key {full}; valid keys: {', '.join(fields)}"


def _coerce(value: Any, typ: Any, path: str) -> Any:
    if dataclasses.is_dataclass(typ):
        return from_dict(value if value is not None else {}, typ, path)
    if typ is bool:
        if isinstance(value, bool):
            return value
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif typ is float:
        # PyYAML reads "3e-4" as a string (YAML 1.1), so numeric strings are accepted for floats.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif typ is str:
        if isinstance(value, str):
            return value
    raise ConfigError(f"{path} must be {typ.__name__}, got {value!r} ({type(value).__name__})")


def _validate_range(value: Any, rules: Any, path: str) -> None:
    if "choices" in rules and value not in rules["choices"]:
        raise ConfigError(f"{path} must be one of {', '.join(rules['choices'])}; got {value!r}")
    checks = {"gt": (lambda v, b: v > b, ">"), "ge": (lambda v, b: v >= b, ">="),
              "lt": (lambda v, b: v < b, "<"), "le": (lambda v, b: v <= b, "<=")}
    for rule, (ok, symbol) in checks.items():
        if rule in rules and not ok(value, rules[rule]):
            raise ConfigError(f"{path} must be {symbol} {rules[rule]}; got {value!r}")


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` overrides to a raw mapping; values are parsed as YAML scalars."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"bad override {item!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
        key, text = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ConfigError(f"bad override {item!r}: empty key segment")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        node = raw
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"bad override {item!r}: {part} is not a section")
            node = child
        node[parts[-1]] = value
    return raw


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a YAML config (or the defaults when `path` is None), apply overrides, validate."""
    raw: Any = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            first = str(err).splitlines()[0] if str(err) else "parse error"
            raise ConfigError(f"{path}: invalid YAML ({first})") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        raw.setdefault("name", path.stem)
    config = from_dict(apply_overrides(raw, overrides or []))
    return config
