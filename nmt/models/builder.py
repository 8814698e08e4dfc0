"""One builder turns a ModelConfig and vocabulary sizes into a model; checkpoints rebuild it from model_args."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

from torch import nn

from nmt.config import ModelConfig, model_args
from nmt.data.tokenizer import PAD_ID
from nmt.errors import NMTError
from nmt.models.bahdanau import Bahdanau
from nmt.models.base import EncoderDecoder
from nmt.models.luong import Luong
from nmt.models.seq2seq import Seq2Seq
from nmt.models.transformer import DropoutRates, Transformer


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool) -> EncoderDecoder:
    """Source, target and output embeddings are one matrix when the vocabulary is joint and tying is on."""
    model = _build_architecture(cfg, src_vocab, tgt_vocab, joint_vocab)
    if cfg.init == "xavier":
        xavier_init(model)
    return model


def xavier_init(model: nn.Module) -> None:
    """Xavier-uniform weight matrices and zero biases in every linear and recurrent layer; embeddings (and output
    projections tied to them) untouched."""
    # A tied output projection is an nn.Linear whose weight *is* the embedding: leave it to the embedding's scheme.
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.RNNBase)):
            for name, param in module.named_parameters(recurse=False):
                if id(param) in embeddings:
                    continue
                if param.dim() >= 2:
                    nn.init.xavier_uniform_(param)
                elif name.startswith("bias"):
                    nn.init.zeros_(param)


@contextlib.contextmanager
def initializers_skipped() -> Iterator[None]:
    """Models built inside are not randomly initialized: torch.nn.init's in-place initializers, which every layer's
    reset_parameters and the builder's own schemes call, leave the tensor as it is (uninitialized memory). Only for a
    model whose every parameter a strict load_state_dict replaces right after: transformer.yaml's 48M parameters
    took ~0.5 s of every `nmt translate`'s start to draw, 0.02 s without (results/cli-startup-transformer-*.json).
    Not thread-safe: torch.nn.init is patched for the whole process while the block runs."""
    names = [name for name in vars(nn.init) if name.endswith("_") and not name.startswith("_")
             and callable(getattr(nn.init, name))]
    saved = {name: getattr(nn.init, name) for name in names}
    for name in names:
        setattr(nn.init, name, _left_as_it_is)
    try:
        yield
    finally:
        for name, initializer in saved.items():
            setattr(nn.init, name, initializer)


def _left_as_it_is(tensor, *args, **kwargs):
    return tensor


def _build_architecture(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool) -> EncoderDecoder:
    tie = cfg.tie_embeddings and joint_vocab
    tgt_embed = nn.Embedding(tgt_vocab, cfg.embed_dim, padding_idx=PAD_ID)
    src_embed = tgt_embed if tie else nn.Embedding(src_vocab, cfg.embed_dim, padding_idx=PAD_ID)
    if cfg.arch == "transformer":
        dropout = DropoutRates.of(cfg.dropout, cfg.attention_dropout, cfg.activation_dropout)
        return Transformer(src_embed, tgt_embed, cfg.num_layers, cfg.num_heads, cfg.ff_dim, dropout,
                           cfg.pre_norm, tie_output=tie, max_positions=cfg.max_positions,
                           bf16_residual=cfg.bf16_residual)
    rnn_args = dict(hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, dropout=cfg.dropout, tie_output=tie)
    if cfg.arch == "seq2seq":
        return Seq2Seq(src_embed, tgt_embed, **rnn_args)
    if cfg.arch == "bahdanau":
        return Bahdanau(src_embed, tgt_embed, **rnn_args)
    return Luong(src_embed, tgt_embed, score=cfg.attention, window=cfg.local_window,
                 input_feeding=cfg.input_feeding, **rnn_args)


def checkpoint_model_args(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool) -> dict:
    """What a checkpoint stores to rebuild its model without the YAML that trained it."""
    return {**model_args(cfg), "src_vocab": src_vocab, "tgt_vocab": tgt_vocab, "joint_vocab": joint_vocab}


def build_from_args(args: dict, base: ModelConfig | None = None) -> EncoderDecoder:
    """The model a checkpoint's model_args describe; non-shape settings (dropout, positions) come from `base`."""
    shape = {k: v for k, v in args.items() if k not in ("src_vocab", "tgt_vocab", "joint_vocab")}
    try:
        cfg = dataclasses.replace(base or ModelConfig(), **shape)
        return build_model(cfg, args["src_vocab"], args["tgt_vocab"], args["joint_vocab"])
    except (KeyError, TypeError) as err:
        raise NMTError(f"checkpoint model_args are incomplete or foreign: {err}") from None


# Renamed parameters: state dicts saved before OutputHead replaced the three output projections.
_LEGACY_KEYS = {"out.weight": "head.proj.weight", "readout.out.weight": "readout.head.proj.weight"}


def upgrade_state_dict(state_dict: dict) -> dict:
    return {_LEGACY_KEYS.get(k, k): v for k, v in state_dict.items()}
