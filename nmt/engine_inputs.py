"""What both engines (the PyTorch translator and CTranslate2's) do with a request before decoding: its sources,
target prefixes and constraint phrases made pieces as the training data was, decode settings given for it checked,
and each refused at once, in one line, where the model's positions cannot hold it."""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from nmt.config import (DecodeConfig, check_constraints, check_fits_positions, check_n_best, decode_lengths,
                        from_dict, sampler_settings_unused)
from nmt.constrained_search import MAX_PHRASES
from nmt.data.normalizer import Normalizer
from nmt.data.tokenizer import Tokenizers
from nmt.errors import ConfigError, NMTError


def encode_source(tokenizers: Tokenizers, normalizer: Normalizer, sentence: str, max_input_tokens: int,
                  warn: Callable[[str], None] | None = None, out_type: type = int) -> tuple[list, bool]:
    """What a model reads for `sentence`: normalized, SentencePiece ids (or pieces), cut to leave room for EOS, and
    whether they were cut; `warn` hears of a cut. Both engines encode through here."""
    pieces = tokenizers.source.encode(normalizer.source(sentence), out_type=out_type)
    limit = max_input_tokens - 1
    if len(pieces) <= limit:
        return pieces, False
    if warn is not None:
        warn(f"input of {len(pieces)} pieces truncated to {limit}: {sentence[:40]!r}...")
    return pieces[:limit], True


def count_pieces(tokenizers: Tokenizers, normalizer: Normalizer, decode: DecodeConfig, sentence: str,
                 prefix: str | None = None) -> int:
    """A sentence's cost unit, for both engines: the source pieces the model will read (EOS included, after
    truncation) and the pieces of the prefix it is held to (a step each)."""
    source = len(encode_source(tokenizers, normalizer, sentence, decode.max_input_tokens)[0]) + 1
    forced = encode_prefixes(tokenizers, normalizer, [prefix], 1) if prefix else None
    return source + (len(forced[0]) if forced else 0)


def prefix_count(prefixes: int, sentences: int) -> str:
    """'2 prefixes for 1 sentence': the start of the refusal when prefixes and sentences do not pair up."""
    return f"{prefixes} prefix{'es' * (prefixes != 1)} for {sentences} sentence{'s' * (sentences != 1)}"


def encode_prefixes(tokenizers: Tokenizers, normalizer: Normalizer, prefixes: Sequence[str | None] | None,
                    count: int, out_type: type = int) -> list[list] | None:
    """Each of `count` sentences' target prefix as pieces (ids, or `out_type` str), normalized as the training
    targets were; [] for a sentence without one (None or ""); None when no sentence has one. Both engines encode
    prefixes through here."""
    if prefixes is None or not any(prefixes):
        return None
    if len(prefixes) != count:
        raise NMTError(f"{prefix_count(len(prefixes), count)}: give one per sentence (none: null or \"\")")
    return [tokenizers.target.encode(normalizer.target(p), out_type=out_type) if p else [] for p in prefixes]


def sum_of_lengths(phrases: list[list[int]]) -> int:
    return sum(map(len, phrases))


def encode_constraints(tokenizers: Tokenizers, normalizer: Normalizer,
                       constraints: Sequence[Sequence[str]] | None, count: int) -> list[list[list[int]]] | None:
    """Each of `count` sentences' constraint phrases as target pieces, each phrase tokenized on its own as the
    training targets were (a word as it starts a word); None when no sentence has one. Refused: a phrase of no
    text, one the vocabulary cannot spell (it would be <unk>), more phrases than a beam's state holds."""
    if constraints is None or not any(constraints):
        return None
    if len(constraints) != count:
        raise NMTError(f"constraints for {len(constraints)} sentences but {count} sentences: give a list for each "
                       "(none: [])")
    target, encoded = tokenizers.target, []
    for phrases in constraints:
        if len(phrases) > MAX_PHRASES:
            raise NMTError(f"{len(phrases)} constraints for one sentence: at most {MAX_PHRASES}")
        ids = [target.encode(normalizer.target(phrase), out_type=int) for phrase in phrases]
        for phrase, pieces in zip(phrases, ids):
            if not pieces:
                raise NMTError(f"constraint {phrase!r} has no text")
            if target.unk_id() in pieces:
                raise NMTError(f"constraint {phrase!r} holds characters this model's vocabulary cannot spell (they "
                               "would be <unk>)")
        encoded.append(ids)
    return encoded


def checked_constraints(engine, constraints: Sequence[Sequence[str]] | None, count: int,
                        forced: list[list[int]] | None, decode: DecodeConfig) -> list[list[list[int]]] | None:
    """`encode_constraints` for an engine (its tokenizers, normalizer and positions), refused where this search
    cannot follow them (greedy search, sampling) or the positions cannot hold them with the longest output and
    prefix (`forced`). The translator and the server, before its queue, check through here."""
    phrases = encode_constraints(engine.tokenizers, engine.normalizer, constraints, count)
    if phrases:
        check_constraints(decode)
        check_constraint_room(phrases, forced, decode, engine.max_target_positions)
    return phrases


def check_constraint_room(phrases: list[list[list[int]]], forced: list[list[int]] | None, decode: DecodeConfig,
                          max_positions: int | None) -> None:
    """The length limit grows by a sentence's constraint pieces: refuse what would pass the model's position table
    (the longest output the config allows, the longest prefix, and the longest constraints together)."""
    if max_positions is None:
        return
    longest = max(range(len(phrases)), key=lambda i: sum_of_lengths(phrases[i]))
    output = max(int(decode.max_len_a * decode.max_input_tokens) + decode.max_len_b,
                 max(map(len, forced), default=0) + 1 if forced else 0)
    if output + sum_of_lengths(phrases[longest]) + 1 > max_positions:
        raise NMTError(f"the constraints of sentence {longest} are {sum_of_lengths(phrases[longest])} pieces: with the "
                       f"longest output the decode settings allow ({output}) that passes model.max_positions "
                       f"{max_positions}; lower decode.max_len_a or decode.max_len_b, or give fewer")


class TargetTooLong(NMTError):
    """A target (a prefix to continue, or a translation to score) longer than the model's position table holds."""

    def __init__(self, what: str, index: int, pieces: int, max_positions: int):
        self.index, self.pieces, self.max_positions = index, pieces, max_positions
        super().__init__(self.said_of(f"{what} {index}"))

    def said_of(self, name: str) -> str:
        return (f"{name} is {self.pieces} pieces; this model holds a target of at most {self.max_positions - 2} "
                f"(model.max_positions {self.max_positions}, with the start token and EOS)")


def check_target_room(targets: list[list] | None, max_positions: int | None, what: str) -> None:
    """Refuse a target longer than the model can read whole: a translation held to a prefix, or scored, takes the
    start token, its pieces and EOS at positions of their own, as config checks count the longest output
    (`max_positions`; None: a recurrent decoder, any length). Both engines check here, before any decoding."""
    if not targets or max_positions is None:
        return
    longest = max(range(len(targets)), key=lambda i: len(targets[i]))
    if len(targets[longest]) > max_positions - 2:
        raise TargetTooLong(what, longest, len(targets[longest]), max_positions)


def with_overrides(decode: DecodeConfig, overrides: dict | None) -> DecodeConfig:
    """`decode` with some fields replaced (None values are ignored: "not given on the command line"), checked whole
    as a config's decode section is (ranges; sampling takes beam 1)."""
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    unknown = set(given) - {f.name for f in dataclasses.fields(DecodeConfig)}
    if unknown:
        raise NMTError(f"unknown decode setting(s): {', '.join(sorted(unknown))}")
    if not given:
        return decode
    replaced = from_dict(dataclasses.asdict(dataclasses.replace(decode, **given)), DecodeConfig, "decode")
    if replaced.samples:
        check_n_best(1, replaced)
    # `--set decode.sampling_topp=0.5` alone decoded by beam search, the setting silently unused.
    unused = [name for name in sampler_settings_unused(replaced) if name in given]
    if unused:
        name = unused[0]
        raise ConfigError(f"decode.{name} {getattr(replaced, name):g} only applies when sampling, which "
                          f"decode.sampling_topk {replaced.sampling_topk} turns off: set it to 0 (the whole "
                          "vocabulary) or K > 1 (a top-p or temperature option alone samples with 0)")
    return replaced


LENGTH_SETTINGS = ("max_input_tokens", "max_len_a", "max_len_b")


def check_overrides_fit_positions(decode: DecodeConfig, overrides: dict | None, positions: int | None) -> None:
    """Decode settings given for this engine that would read or write past the model's position table (`positions`),
    refused at once. Only given ones: an ensemble decodes with its first run's own settings, which a member with a
    shorter table bounds only for sentences that long."""
    if any((overrides or {}).get(name) is not None for name in LENGTH_SETTINGS):
        check_fits_positions(decode_lengths(decode), positions,
                             f"lower it: the model was trained with {positions} positions")
