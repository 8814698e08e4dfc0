"""`--set KEY=VALUE` over a config as it loads, and what the commands that decode may change of a trained run's
decode settings (`--set decode.KEY=VALUE`, their sampling options)."""

from __future__ import annotations

import yaml

from nmt.config.parsing import UniqueKeyLoader, from_dict
from nmt.config.sections import SECTIONS, DecodeConfig, sections_holding
from nmt.errors import ConfigError


def sampling_overrides(topk: int | None, topp: float | None, temperature: float | None,
                       beam: int | None) -> dict:
    """What a command line's or a request's sampling options ask of the decode settings: top-p or a temperature asks
    for sampling (over the whole vocabulary unless top-k says otherwise), and sampling replaces the run's beam with 1
    unless a beam is given (then check_n_best refuses it)."""
    if topp is not None and topp <= 0.0:
        raise ConfigError("top-p must be above 0 (1: no cut)")
    if temperature is not None and temperature <= 0.0:
        raise ConfigError("the temperature must be above 0")
    if topk is None and topp is None and temperature is None:
        return {}
    topk = 0 if topk is None else topk
    return {"sampling_topk": topk, **({"beam_size": 1} if beam is None and topk != 1 else {})}


def decode_overrides(items: list[str]) -> dict:
    """`--set decode.KEY=VALUE` items of the commands that decode, as {field: value}, each checked as a config file's
    would be; any other section is refused (the model and the data were fixed by training)."""
    raw = apply_overrides({}, items)
    others = sorted(set(raw) - {"decode"})
    if others:
        other = others[0]
        if "decode" in sections_holding(other):
            raise ConfigError(f"--set {other}=…: a decode setting takes its section: --set decode.{other}=…")
        if other not in SECTIONS:
            raise ConfigError(f"--set {other}…: no such setting; only decode settings apply here "
                              f"(--set decode.KEY=VALUE, e.g. decode.batch_size=50)")
        raise ConfigError(f"--set {other}.…: only decode settings apply here (--set decode.KEY=VALUE, e.g. "
                          f"decode.batch_size=50); the {other} section was fixed by training")
    given = raw.get("decode", {})
    if not isinstance(given, dict):
        raise ConfigError("--set decode=…: name a setting, e.g. --set decode.batch_size=50")
    for key in given:
        home = sections_holding(key)
        if home and "decode" not in home:
            raise ConfigError(f"--set decode.{key}: {key} is a {home[0]} setting, fixed by training; only decode "
                              f"settings apply here")
    checked = from_dict(given, DecodeConfig, "decode")
    return {key: getattr(checked, key) for key in given}


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
            value = yaml.load(text, Loader=UniqueKeyLoader) if text.strip() else ""  # noqa: S506 - a SafeLoader
        except ConfigError as err:
            raise ConfigError(f"--set {key.strip()}: {str(err).split(': ', 1)[-1]}") from None
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
