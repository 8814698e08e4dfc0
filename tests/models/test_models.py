"""Every architecture: shapes, gradients, padding invariance, teacher forcing == stepping, overfitting."""

import numpy as np
import pytest
import torch

from nmt.config import ModelConfig
from nmt.data.batching import collate
from nmt.data.dataset import ParallelArrays
from nmt.data.tokenizer import EOS_ID, PAD_ID
from nmt.models import build_model
from nmt.models.base import AttentionChoice
from tests_helpers import VOCAB, make_model
ARCHS = {
    "seq2seq": dict(arch="seq2seq"),
    "bahdanau": dict(arch="bahdanau"),
    "luong-general": dict(arch="luong", attention="general"),
    "luong-dot-feed": dict(arch="luong", attention="dot", input_feeding=True),
    "luong-concat": dict(arch="luong", attention="concat"),
    "luong-local-p": dict(arch="luong", attention="local-p", local_window=2, input_feeding=True),
    "transformer-pre": dict(arch="transformer", pre_norm=True),
    "transformer-post": dict(arch="transformer", pre_norm=False),
}


def make(name, dropout=0.0, joint=True):
    return make_model(dropout=dropout, joint=joint, **ARCHS[name])


def sentence(length, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randint(4, VOCAB, (length,), generator=g), torch.tensor([EOS_ID])])


def pad(rows):
    out = torch.full((len(rows), max(map(len, rows))), PAD_ID)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


@pytest.mark.parametrize("name", ARCHS)
def test_shapes_and_gradients(name):
    model = make(name, dropout=0.1).train()
    src, tgt = pad([sentence(5, 1), sentence(3, 2)]), pad([sentence(4, 3), sentence(6, 4)])
    logits = model(src, tgt)
    assert logits.shape == (2, tgt.shape[1], VOCAB)
    logits.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"parameters without gradient: {missing}"


@pytest.mark.parametrize("name", ARCHS)
def test_output_independent_of_batching(name):
    """A sentence's logits must not change when it is batched with longer sentences (masking)."""
    model = make(name).eval()
    src, tgt = sentence(4, 5), sentence(3, 6)
    alone = model(src.unsqueeze(0), tgt.unsqueeze(0))[0]
    batched = model(pad([src, sentence(11, 7), sentence(8, 9)]), pad([tgt, sentence(9, 8), sentence(2, 1)]))
    torch.testing.assert_close(batched[0, :len(tgt)], alone, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ARCHS)
def test_teacher_forcing_equals_incremental_steps(name):
    model = make(name).eval()
    src, tgt = pad([sentence(6, 1), sentence(3, 2)]), pad([sentence(5, 3), sentence(5, 4)])
    full = model(src, tgt)
    state, steps = model.encode(src), []
    for t in range(tgt.shape[1]):
        logits, state, attention = model.step(tgt[:, t], state, AttentionChoice())
        steps.append(logits)
        assert "attention" not in state  # weights are a return value, never state that search reorders
        if name == "seq2seq":
            assert attention is None
        else:
            assert attention.shape == (2, src.shape[1])
            torch.testing.assert_close(attention[1, 4:], torch.zeros(src.shape[1] - 4))  # padded keys get nothing
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ARCHS)
def test_overfits_tiny_batch(name):
    model = make(name).train()
    src = pad([sentence(5, s) for s in range(4)])
    tgt = pad([sentence(4, 10 + s) for s in range(4)])
    tgt_in = torch.cat([torch.full((4, 1), 2), tgt[:, :-1]], 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(150):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(src, tgt_in).reshape(-1, VOCAB), tgt.reshape(-1),
                                                 ignore_index=PAD_ID)
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05
    assert (model.eval()(src, tgt_in).argmax(-1) == tgt)[tgt != PAD_ID].all()


def test_tied_embeddings_share_one_matrix():
    model = make("transformer-pre", joint=True)
    assert model.src_embed.weight is model.tgt_embed.weight is model.head.weight
    untied = make("transformer-pre", joint=False)
    assert untied.src_embed.weight is not untied.tgt_embed.weight


@pytest.mark.parametrize("name", ARCHS)
def test_a_model_built_without_initialization_then_loaded_is_the_model(name):
    """What translate does (nmt.translator): build with the initializers skipped, then load every parameter. No
    random number is drawn while it builds (the generator is where it was), the loaded model gives the original's
    outputs, and the initializers are back afterwards, also when the build fails."""
    from nmt.models.builder import build_from_args, checkpoint_model_args, initializers_skipped

    original = make_model(**ARCHS[name], init="xavier").eval()
    cfg = ModelConfig(**ARCHS[name], embed_dim=32, hidden_size=32, num_layers=2, num_heads=4, ff_dim=64, dropout=0.0,
                      init="xavier")
    args = checkpoint_model_args(cfg, VOCAB, VOCAB, True)
    before = torch.get_rng_state()
    with initializers_skipped():
        rebuilt = build_from_args(args, cfg)
    assert torch.equal(torch.get_rng_state(), before)
    rebuilt.load_state_dict(original.state_dict())
    rebuilt.eval()
    src, tgt = pad([sentence(5, 1), sentence(3, 2)]), pad([sentence(4, 3), sentence(6, 4)])
    torch.testing.assert_close(rebuilt(src, tgt), original(src, tgt), rtol=0, atol=0)
    with pytest.raises(ZeroDivisionError), initializers_skipped():
        1 / 0
    build_from_args(args, cfg)
    assert not torch.equal(torch.get_rng_state(), before)  # initialized again: random numbers drawn


def test_xavier_init_zeroes_biases_and_keeps_embeddings():
    torch.manual_seed(0)
    default = build_model(ModelConfig(arch="bahdanau", embed_dim=16, hidden_size=16), 50, 50, True)
    torch.manual_seed(0)
    xavier = build_model(ModelConfig(arch="bahdanau", embed_dim=16, hidden_size=16, init="xavier"), 50, 50, True)
    params = dict(xavier.named_parameters())
    biases = [n for n in params if n.rsplit(".", 1)[-1].startswith("bias")]
    assert biases and all(params[n].abs().sum() == 0 for n in biases)
    embedding = next(n for n in params if "embed" in n)
    assert torch.equal(params[embedding], dict(default.named_parameters())[embedding])
    recurrent = next(n for n in params if "weight_hh" in n)
    bound = (6 / sum(params[recurrent].shape)) ** 0.5
    assert params[recurrent].abs().max() <= bound
    assert not torch.equal(params[recurrent], dict(default.named_parameters())[recurrent])


@pytest.mark.parametrize("name", ["bahdanau", "luong-dot-feed", "luong-local-p"])
def test_recurrent_teacher_forcing_projects_to_the_vocabulary_once(name):
    """Only the recurrence steps: the vocabulary projection runs once over the kept positions (through the fused
    loss), never once per target step over (B, V) logits."""
    model = make(name).train()
    head = model.readout.head if name == "bahdanau" else model.head
    calls = []
    head.register_forward_hook(lambda module, args, output: calls.append(args[0].shape))
    src, tgt = pad([sentence(6, 1), sentence(3, 2)]), pad([sentence(5, 3), sentence(2, 4)])
    keep = tgt.ne(PAD_ID)
    loss = model(src, tgt, keep, tgt[keep], 0.1)
    loss.backward()
    assert calls == [(int(keep.sum()), head.weight.shape[1])]


@pytest.mark.parametrize("name", [n for n, a in ARCHS.items() if a["arch"] != "transformer"])
def test_recurrent_models_pack_rows_longest_first_with_host_lengths(name):
    """Training's recurrent batches come longest source first with their lengths on the host (no host sync to pack
    them on a GPU): the same loss and gradients as the batch in plan order, whose lengths the encoder counts."""
    rng = np.random.default_rng(3)
    src_len, tgt_len = rng.integers(1, 12, 9), rng.integers(1, 12, 9)
    arrays = ParallelArrays(rng.integers(4, VOCAB, src_len.sum()), np.r_[0, np.cumsum(src_len)],
                            rng.integers(4, VOCAB, tgt_len.sum()), np.r_[0, np.cumsum(tgt_len)])
    model = make(name).double()
    assert model.takes_source_lengths
    losses, grads = [], []
    for longest_first in (False, True):
        batch = collate(arrays, np.arange(9), longest_source_first=longest_first)
        assert (batch.source_lengths is not None) == longest_first
        inputs = {"src_lengths": batch.source_lengths} if longest_first else {}
        model.zero_grad()
        loss = model(batch.src, batch.tgt_in, batch.keep, batch.targets, 0.1, **inputs)
        loss.backward()
        losses.append(loss.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    assert not torch.equal(collate(arrays, np.arange(9)).src, collate(arrays, np.arange(9), None, True).src)
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-12, atol=0)
    for sorted_grad, plain_grad in zip(*grads):
        torch.testing.assert_close(sorted_grad, plain_grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("pre_norm", [True, False], ids=["pre", "post"])
def test_bf16_residual_carries_the_stream_in_bf16_and_trains_as_the_fp32_stream(pre_norm):
    """model.bf16_residual: under bf16 autocast every layer hands on bf16 (autocast alone hands on fp32); the same
    parameters, losses and gradients to bf16's rounding; in fp32 nothing changes, bit for bit."""
    default = make_model("transformer", pre_norm=pre_norm)
    bf16 = make_model("transformer", pre_norm=pre_norm, bf16_residual=True)
    assert bf16.state_dict().keys() == default.state_dict().keys()
    bf16.load_state_dict(default.state_dict())
    src, tgt = pad([sentence(6, 1), sentence(3, 2)]), pad([sentence(5, 3), sentence(4, 4)])
    keep, targets = torch.arange(tgt.numel() - 2), tgt[:, 1:].reshape(-1)

    def loss_grads_and_stream(model, autocast):
        model.zero_grad()
        stream = []
        hooks = [layer.register_forward_hook(lambda m, i, out: stream.append(out[0].dtype if isinstance(out, tuple)
                                                                             else out.dtype))
                 for layer in (*model.encoder_layers, *model.decoder_layers)]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(src, tgt[:, :-1], keep=keep, targets=targets)
        loss.backward()
        for hook in hooks:
            hook.remove()
        return loss, torch.cat([p.grad.flatten() for p in model.parameters()]), set(stream)

    loss, grads, stream = loss_grads_and_stream(default, autocast=True)
    loss_bf16, grads_bf16, stream_bf16 = loss_grads_and_stream(bf16, autocast=True)
    assert stream == {torch.float32} and stream_bf16 == {torch.bfloat16}
    assert loss_bf16.item() == pytest.approx(loss.item(), rel=2e-2)
    assert torch.nn.functional.cosine_similarity(grads_bf16, grads, dim=0) > 0.99
    loss, grads, _ = loss_grads_and_stream(default, autocast=False)
    loss_bf16, grads_bf16, stream_bf16 = loss_grads_and_stream(bf16, autocast=False)
    assert stream_bf16 == {torch.float32}
    assert torch.equal(loss_bf16, loss) and torch.equal(grads_bf16, grads)


def test_bf16_residual_decodes_step_by_step_as_it_teacher_forces():
    """Decoding one position at a time (positions from the cache's length) carries the bf16 stream too, and gives
    teacher forcing's logits to bf16's rounding, with the same argmax."""
    model = make_model("transformer", bf16_residual=True).eval()
    stream = []
    for layer in model.decoder_layers:
        layer.register_forward_hook(lambda m, i, out: stream.append(out[0].dtype))
    src, tgt = pad([sentence(6, 1), sentence(3, 2)]), pad([sentence(5, 3), sentence(5, 4)])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        full = model(src, tgt).float()
        state, steps = model.encode(src), []
        for t in range(tgt.shape[1]):
            logits, state, _ = model.step(tgt[:, t], state)
            steps.append(logits.float())
    assert len(stream) == len(model.decoder_layers) * (1 + tgt.shape[1]) and set(stream) == {torch.bfloat16}
    stepped = torch.stack(steps, 1)
    torch.testing.assert_close(stepped, full, atol=0.1, rtol=0.05)
    assert (stepped.argmax(-1) == full.argmax(-1)).float().mean() > 0.9


@pytest.mark.parametrize("rates, random", [
    ({}, False),  # everything at model.dropout 0: deterministic in training mode
    ({"attention_dropout": 0.5}, True), ({"activation_dropout": 0.5}, True),
    ({"dropout": 0.5, "attention_dropout": 0.0, "activation_dropout": 0.0}, True),  # the residual branches still drop
])
def test_attention_and_activation_dropout_drop_where_they_say(rates, random):
    """model.attention_dropout / activation_dropout (fairseq's) each switch on dropout of their own in training mode,
    and leave `dropout`'s residual dropout alone; unset, they follow `dropout`."""
    model = make_model("transformer", **{"dropout": 0.0, **rates}).train()
    src, tgt = pad([sentence(5, 1), sentence(3, 2)]), pad([sentence(4, 3), sentence(6, 4)])
    first, second = model(src, tgt), model(src, tgt)
    assert (not torch.equal(first, second)) == random
    layer = model.decoder_layers[0]
    expected = rates.get("dropout", 0.0)
    assert layer.res_ff.dropout.p == expected and model.positions.dropout.p == expected
    assert layer.cross_attn.dropout == rates.get("attention_dropout", expected)
    assert layer.ff[2].p == rates.get("activation_dropout", expected)
