"""One builder turns a ModelConfig and vocabulary sizes into a model."""

from __future__ import annotations

from torch import nn

from nmt.config import ModelConfig
from nmt.data.tokenizer import PAD_ID
from nmt.models.bahdanau import Bahdanau
from nmt.models.base import EncoderDecoder
from nmt.models.luong import Luong
from nmt.models.seq2seq import Seq2Seq
from nmt.models.transformer import Transformer


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool) -> EncoderDecoder:
    """Source, target and output embeddings are one matrix when the vocabulary is joint and tying is on."""
    tie = cfg.tie_embeddings and joint_vocab
    tgt_embed = nn.Embedding(tgt_vocab, cfg.embed_dim, padding_idx=PAD_ID)
    src_embed = tgt_embed if tie else nn.Embedding(src_vocab, cfg.embed_dim, padding_idx=PAD_ID)
    if cfg.arch == "transformer":
        for embed in {id(src_embed): src_embed, id(tgt_embed): tgt_embed}.values():
            nn.init.normal_(embed.weight, mean=0.0, std=cfg.embed_dim**-0.5)
            nn.init.zeros_(embed.weight[PAD_ID])
        return Transformer(src_embed, tgt_embed, cfg.num_layers, cfg.num_heads, cfg.ff_dim, cfg.dropout,
                           cfg.pre_norm, tie_output=tie)
    rnn_args = dict(hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, dropout=cfg.dropout, tie_output=tie)
    if cfg.arch == "seq2seq":
        return Seq2Seq(src_embed, tgt_embed, **rnn_args)
    if cfg.arch == "bahdanau":
        return Bahdanau(src_embed, tgt_embed, **rnn_args)
    return Luong(src_embed, tgt_embed, score=cfg.attention, window=cfg.local_window,
                 input_feeding=cfg.input_feeding, **rnn_args)
