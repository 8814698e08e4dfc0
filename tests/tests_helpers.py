"""Small builders shared by tests (tiny models and sources)."""

import torch

from nmt.config import ModelConfig
from nmt.data.tokenizer import EOS_ID, PAD_ID
from nmt.models import build_model

VOCAB = 40


def make_model(arch: str, dropout: float = 0.0, joint: bool = True, **overrides):
    """A tiny model (d=32, 2 layers) with fixed initial weights."""
    torch.manual_seed(0)
    cfg = ModelConfig(arch=arch, embed_dim=32, hidden_size=32, num_layers=2, num_heads=4, ff_dim=64, dropout=dropout,
                      **overrides)
    return build_model(cfg, VOCAB, VOCAB, joint)


def random_sources(lengths=(3, 7, 5, 1), seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.full((len(lengths), max(lengths) + 1), PAD_ID)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        out[i, n] = EOS_ID
    return out
