"""The shared attention signature: (query, keys, values, key_padding_mask) → (context, weights)."""

import pytest
import torch

from nmt.models.attention import AdditiveAttention, DotAttention, LocalPAttention, MultiHeadAttention


@pytest.mark.parametrize("make", [lambda: DotAttention(8, 8, general=True), lambda: AdditiveAttention(8, 8, 6),
                                  lambda: LocalPAttention(8, 8, window=2)], ids=["general", "additive", "local-p"])
def test_scored_attentions_ignore_padding_and_normalize(make):
    torch.manual_seed(0)
    attention = make()
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[False] * 5, [False, False, False, True, True]])
    context, weights = attention(query, attention.prepare_keys(memory), memory, mask)
    assert context.shape == (2, 3, 8) and weights.shape == (2, 3, 5)
    assert torch.all(weights[1, :, 3:] == 0)


def test_multi_head_honours_separate_keys_and_values():
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2, dropout=0.0).eval()
    query, keys, values = torch.randn(1, 2, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8)
    context, _ = attention(query, keys, values)
    same, _ = attention(query, keys, keys)
    assert not torch.allclose(context, same), "values must not be taken from keys"
    q = attention.project_query(query)
    k, _ = attention.project_keys_values(keys)
    _, v = attention.project_keys_values(values)
    manual, _ = attention.attend(q, k, v)
    torch.testing.assert_close(context, manual)


def test_multi_head_weights_match_sdpa_path():
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2, dropout=0.0).eval()
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[False] * 5, [False, False, True, True, True]])
    fast, none = attention(query, memory, memory, mask)
    slow, weights = attention(query, memory, memory, mask, need_weights=True)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    assert none is None and weights.shape == (2, 2, 3, 5) and torch.all(weights[1, :, :, 2:] == 0)
