"""Rules across settings: what cannot work together is refused as a config loads (one line naming the settings),
what would be ignored is a warning."""

from __future__ import annotations

import re

from nmt.config.sections import (BUILTIN_CORPUS, CUDA_GRAPH_MODES, MIN_PEAK_TFLOPS, Config, DataConfig, DecodeConfig,
                                 ModelConfig, TrainConfig, tsv_columns)
from nmt.errors import ConfigError


def _sampling_settings(decode: DecodeConfig) -> str:
    """The sampling settings a user set, e.g. 'top-p 0.5': 'top-k 0' alone read as a setting nobody gave."""
    settings = [f"top-k {decode.sampling_topk}"] if decode.sampling_topk > 1 else []
    if decode.sampling_topp < 1.0:
        settings.append(f"top-p {decode.sampling_topp:g}")
    if decode.sampling_temperature != 1.0:
        settings.append(f"temperature {decode.sampling_temperature:g}")
    return ", ".join(settings) or "over the whole vocabulary"


def sampler_settings_unused(decode: DecodeConfig) -> list[str]:
    """The sampler settings `decode` changes from their defaults (top-p, temperature) while it does not sample
    (decode.sampling_topk 1: search), where they have no effect."""
    if decode.samples:
        return []
    return [name for name in ("sampling_topp", "sampling_temperature") if getattr(decode, name) != 1.0]


def check_n_best(n_best: int, decode: DecodeConfig) -> None:
    """Beam search keeps `beam_size` hypotheses, so it can rank that many and no more; greedy search finds one;
    sampling draws any number, one sentence at a time (beam 1)."""
    if n_best < 1:
        raise ConfigError(f"n-best must be 1 or more, not {n_best}")
    if decode.samples:
        if decode.beam_size != 1:
            raise ConfigError(f"sampling ({_sampling_settings(decode)}) draws one continuation at a time: it takes "
                              f"beam 1, not {decode.beam_size} (an n-best list is that many draws)")
    elif n_best > decode.beam_size:
        raise ConfigError(f"an n-best list of {n_best} needs a beam of {n_best} or more (the beam is "
                          f"{decode.beam_size})")


def check_constraints(decode: DecodeConfig) -> None:
    """Lexical constraints steer beam search: its beams are shared out by how much of the phrases they hold, which
    greedy search (one beam) and sampling cannot do."""
    if decode.samples:
        raise ConfigError(f"constraints steer beam search; sampling ({_sampling_settings(decode)}) draws instead: "
                          "drop one of the two")
    if decode.beam_size < 2:
        raise ConfigError("constraints need beam search: a beam of 2 or more (--beam), not greedy search's 1")


# BCP 47 tags are case-insensitive (`EN`, `pt-br`), and locales write `pt_BR`: all were "not a language code".
_LANGUAGE_CODE = re.compile(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*")


def subword_sampling_refused(cfg: DataConfig) -> str:
    """Why data.subword_alpha cannot be used with this tokenizer ("" where it can)."""
    if not cfg.subword_alpha or cfg.tokenizer_type == "unigram":
        return ""
    why = ("SentencePiece's BPE-dropout draws from a generator that no seed makes repeat, and the same settings must "
           "prepare the same data" if cfg.tokenizer_type == "bpe" else
           f"a {cfg.tokenizer_type} vocabulary has one way to cut a sentence")
    return (f"data.subword_alpha draws among the segmentations of a unigram model: {why} (data.tokenizer_type "
            "unigram, or data.subword_alpha: 0)")


def decode_lengths(d: DecodeConfig) -> list[tuple[str, int]]:
    """The positions decoding may use, named: the longest input it reads and the longest output it may write
    (max_len_a × that + max_len_b, and the start token)."""
    return [("decode.max_input_tokens", d.max_input_tokens),
            ("decode.max_len_a * max_input_tokens + max_len_b + 1", int(d.max_len_a * d.max_input_tokens)
             + d.max_len_b + 1)]


def check_fits_positions(lengths: list[tuple[str, int]], positions: int | None, remedy: str) -> None:
    """Each named length within a Transformer's position table (`positions`; None: a model without one). Past it,
    decoding failed at the first sentence that long, with an error that named no setting."""
    for what, length in lengths if positions is not None else ():
        if length > positions:
            raise ConfigError(f"{what} = {length} exceeds model.max_positions {positions} (the Transformer's "
                              f"position table); {remedy}")


def check_consistency(cfg: Config) -> list[str]:
    """Rules across fields: raise ConfigError for what cannot work, return warnings for what is ignored."""
    _check_model(cfg)
    if cfg.decode.samples:
        check_n_best(1, cfg.decode)  # sampling takes beam 1: said when the config loads, not at its first translation
    _check_data(cfg.data)
    _check_train(cfg.train, cfg.model)
    return [*_ignored_train_settings(cfg.train), *_ignored_model_settings(cfg.model),
            *_ignored_decode_and_data_settings(cfg)]


def _check_model(cfg: Config) -> None:
    m, d = cfg.model, cfg.decode
    if m.arch == "transformer":
        if m.embed_dim % m.num_heads:
            raise ConfigError(f"model.embed_dim {m.embed_dim} must be divisible by model.num_heads {m.num_heads}")
        if m.embed_dim % 2:
            raise ConfigError(f"model.embed_dim {m.embed_dim} must be even (sinusoidal positions come in pairs)")
        check_fits_positions([*decode_lengths(d), ("data.max_pieces + 1", cfg.data.max_pieces + 1)],
                             m.max_positions, "lower it or raise model.max_positions")


def _check_data(data: DataConfig) -> None:
    if data.tokenizer_type == "word" and data.byte_fallback:
        raise ConfigError("data.tokenizer_type word with data.byte_fallback: an unseen word would be spelt in bytes "
                          "with its '▁' marker, which decodes as that character, not a space; set "
                          "data.byte_fallback: false (an unseen word is then <unk>, as in a word vocabulary)")
    if refused := subword_sampling_refused(data):
        raise ConfigError(refused)
    source_column, target_column = tsv_columns(data)
    if source_column == target_column:
        raise ConfigError(f"data.source_column and data.target_column both read column {source_column} (unset: 1 "
                          "and 2): name two columns")
    if 0 < data.max_length_ratio < 1:
        raise ConfigError(f"data.max_length_ratio {data.max_length_ratio:g} would drop every pair (a longer side "
                          "over a shorter one is at least 1): set 0 (no filter) or 1 and more, e.g. 3")
    for key in ("source_lang", "target_lang"):
        code = getattr(data, key)
        if code and not _LANGUAGE_CODE.fullmatch(code):
            raise ConfigError(f"data.{key} {code!r} is not a language code (ISO 639, e.g. en, fr, de, pt-BR)")


def _check_train(t: TrainConfig, m: ModelConfig) -> None:
    if 0 < t.peak_tflops < MIN_PEAK_TFLOPS:
        raise ConfigError(f"train.peak_tflops {t.peak_tflops!r} is below any device's: set 0 (the GPU's peak from a "
                          f"table, or a matmul measured on CPU) or the device's peak, from {MIN_PEAK_TFLOPS:g}")
    if t.schedule in ("linear", "cosine") and t.warmup_steps >= t.max_steps:
        raise ConfigError(f"train.schedule {t.schedule} decays from train.warmup_steps {t.warmup_steps} to "
                          f"train.max_steps {t.max_steps}: warmup_steps must be smaller")
    if t.eval_in_background and t.schedule == "plateau":
        raise ConfigError("train.eval_in_background: the plateau schedule changes the lr at each validation's "
                          "outcome, which training would have to wait for; use another train.schedule, or validate "
                          "inline (train.eval_in_background: false)")
    _check_compiled_and_captured(t, m)
    if t.pack_length:
        if m.arch != "transformer":
            raise ConfigError(f"train.pack_length packs several sentences into a row, which only the Transformer "
                              f"can keep apart (a {m.arch} model's recurrence runs along the row): set it to 0")
        if t.length_multiple:
            raise ConfigError("train.pack_length and train.length_multiple are two ways to static shapes: set one")
        if t.pack_length > t.max_tokens:
            raise ConfigError(f"train.pack_length {t.pack_length} exceeds train.max_tokens {t.max_tokens}: a batch "
                              "must hold at least one row")
    if t.packed_attention == "flex":
        _check_flex_attention(m, t)


def _check_compiled_and_captured(t: TrainConfig, m: ModelConfig) -> None:
    """train.compile and train.cuda_graph: the static shapes CUDA graphs need, and the ways of getting them that
    exclude each other."""
    graphs = (f"train.compile_backend {t.compile_backend}" if t.compile_backend == "cudagraphs"
              else f"train.compile_mode {t.compile_mode}" if t.compile_mode in CUDA_GRAPH_MODES else None)
    if t.compile and graphs and not (t.length_multiple or t.pack_length):
        raise ConfigError(f"{graphs} records a CUDA graph per batch shape: set "
                          "train.pack_length (e.g. 128) or train.length_multiple (e.g. 8) so that batches come in "
                          "static shapes")
    if t.compile and t.compile_scope == "layers":
        if m.arch != "transformer":
            raise ConfigError(f"train.compile_scope layers compiles the Transformer's repeated layers; a {m.arch} "
                              "model compiles whole (train.compile_scope: model)")
        if graphs:
            raise ConfigError(f"train.compile_scope layers and {graphs}: CUDA graphs of single layers would leave "
                              "the launches between them to the host; set train.cuda_graph for one graph of the "
                              "whole update, or compile the whole model (train.compile_scope: model)")
    if t.cuda_graph:
        if not (t.pack_length or t.length_multiple):
            raise ConfigError("train.cuda_graph captures an update per batch shape: set train.pack_length (e.g. "
                              "128, the Transformer's one shape) or train.length_multiple (e.g. 8, a shape per "
                              "width)")
        if t.compile and graphs:  # inductor's kernels without its own graphs are what a captured update wants
            raise ConfigError(f"train.cuda_graph and {graphs} are two ways to CUDA graphs: set one (train.compile "
                              "with compile_mode default or max-autotune-no-cudagraphs and the inductor backend "
                              "fuses the kernels that train.cuda_graph then captures)")
        if t.precision == "fp16":
            raise ConfigError("train.cuda_graph takes precision bf16 or fp32 (fp16's loss scaler decides on the host)")


def _ignored_train_settings(t: TrainConfig) -> list[str]:
    warnings = []
    for name, default in (("compile_mode", "default"), ("compile_backend", "inductor"), ("compile_scope", "model")):
        if getattr(t, name) != default and not t.compile:
            warnings.append(f"train.{name} {getattr(t, name)} has no effect without train.compile: true (ignored)")
    if t.schedule == "plateau" and t.warmup_steps != TrainConfig.warmup_steps:
        warnings.append(f"train.warmup_steps {t.warmup_steps} has no effect with train.schedule plateau, which starts "
                        "at train.lr (ignored)")
    if t.schedule in ("inverse_sqrt", "constant") and t.warmup_steps > t.max_steps:  # linear, cosine: an error
        # A short run of a config written for a long one (max_steps lowered, the default 4,000 warm-up kept) trained
        # at a fraction of its lr and learnt next to nothing, with no word of why.
        warnings.append(f"train.warmup_steps {t.warmup_steps} > train.max_steps {t.max_steps}: training ends with "
                        f"the learning rate still warming up (at most {t.max_steps / t.warmup_steps:.1%} "
                        f"of train.lr {t.lr:g}); lower train.warmup_steps")
    if t.compile and t.compile_backend == "cudagraphs" and t.compile_mode != "default":
        warnings.append(f"train.compile_mode {t.compile_mode} is inductor's: train.compile_backend cudagraphs "
                        "ignores it")
    return warnings


def _ignored_model_settings(m: ModelConfig) -> list[str]:
    warnings = []
    defaults = ModelConfig()
    transformer_only = ("num_heads", "ff_dim", "pre_norm", "max_positions", "bf16_residual", "attention_dropout",
                        "activation_dropout")
    ignored = {"transformer": ("hidden_size", "attention", "local_window", "input_feeding"),
               "luong": transformer_only,
               "bahdanau": (*transformer_only, "attention", "local_window", "input_feeding"),
               "seq2seq": (*transformer_only, "attention", "local_window", "input_feeding")}[m.arch]
    for name in ignored:
        if getattr(m, name) != getattr(defaults, name):
            warnings.append(f"model.{name} has no effect on a {m.arch} model (ignored)")
    if m.arch == "luong" and m.attention != "local-p" and m.local_window != defaults.local_window:
        warnings.append("model.local_window only applies to model.attention: local-p (ignored)")
    return warnings


def _ignored_decode_and_data_settings(cfg: Config) -> list[str]:
    warnings = []
    for name in sampler_settings_unused(cfg.decode):
        warnings.append(f"decode.{name} {getattr(cfg.decode, name):g} has no effect without sampling "
                        "(decode.sampling_topk 1: search) (ignored)")
    if cfg.data.source_file and cfg.data.corpus.strip() and cfg.data.corpus != BUILTIN_CORPUS:  # "": none named
        warnings.append(f"data.corpus {cfg.data.corpus} is not read: data.source_file + data.target_file name the "
                        "training text (ignored)")
    read_whole = ("data.source_file + data.target_file are" if cfg.data.source_file
                  else "the built-in corpus is" if cfg.data.corpus == BUILTIN_CORPUS else None)
    for name in ("source_column", "target_column"):
        if getattr(cfg.data, name) is not None and read_whole:
            warnings.append(f"data.{name} picks a column of a data.corpus of your own; {read_whole} read as they "
                            "come (ignored)")
    for name in ("subword_nbest", "subword_samples"):
        if getattr(cfg.data, name) != getattr(DataConfig, name) and not cfg.data.subword_alpha:
            warnings.append(f"data.{name} {getattr(cfg.data, name)} has no effect without data.subword_alpha (ignored)")
    return warnings


def _check_flex_attention(m: ModelConfig, t: TrainConfig) -> None:
    if not t.pack_length or t.pack_length % 128:
        raise ConfigError(f"train.packed_attention flex takes packed rows of a multiple of 128 positions (its "
                          f"tiles; torch 2.13's CPU kernel got shorter rows wrong, pytorch#159247): set "
                          f"train.pack_length to 128, 256, ... (now {t.pack_length})")
    attention_dropout = m.dropout if m.attention_dropout is None else m.attention_dropout
    if attention_dropout:
        raise ConfigError(f"train.packed_attention flex has no attention dropout: set model.attention_dropout: 0 "
                          f"(now {attention_dropout}{', model.dropout' if m.attention_dropout is None else ''})")
    import torch  # only for this setting: the config module stays free of torch for the CLI's start-up

    from nmt.models.flex_masks import flex_attention_available

    if not flex_attention_available():
        raise ConfigError(f"train.packed_attention flex needs torch >= 2.5 (FlexAttention), not {torch.__version__}")
