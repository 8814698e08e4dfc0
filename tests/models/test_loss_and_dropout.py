"""The fused head cross-entropy against F.cross_entropy of the full logits, and the CPU dropout's statistics."""

import pytest
import torch
import torch.nn.functional as F

from nmt.data.tokenizer import PAD_ID
from nmt.models.dropout import Dropout, dropout, keep_mask
from nmt.models.loss import block_rows, head_cross_entropy
from tests.models.test_models import ARCHS, make, pad, sentence


def reference(features, weight, targets, smoothing):
    logits = F.linear(features, weight)
    return F.cross_entropy(logits.to(torch.promote_types(logits.dtype, torch.float32)), targets,
                           label_smoothing=smoothing, reduction="sum")


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("rows", [None, 7, 1000])  # one block, ragged blocks, one block larger than N
def test_head_cross_entropy_matches_full_logits(smoothing, rows):
    g = torch.Generator().manual_seed(0)
    features = torch.randn(50, 16, generator=g, dtype=torch.float64, requires_grad=True)
    weight = (torch.randn(37, 16, generator=g, dtype=torch.float64) * 0.3).requires_grad_()
    targets = torch.randint(0, 37, (50,), generator=g)
    expected = reference(features, weight, targets, smoothing)
    got = head_cross_entropy(features, weight, targets, smoothing, rows)
    assert torch.allclose(got.double(), expected, rtol=1e-6)
    scale = torch.tensor(0.37, dtype=torch.float64)  # the incoming gradient scales the precomputed ones
    for a, b in zip(torch.autograd.grad(expected * scale, (features, weight)),
                    torch.autograd.grad(head_cross_entropy(features, weight, targets, smoothing, rows) * scale,
                                        (features, weight))):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_head_cross_entropy_under_bf16_autocast_stays_close(smoothing):
    """Loss and gradients in bf16 (the logits' gradient made in fp32, written back in bf16) near fp32's."""
    g = torch.Generator().manual_seed(1)
    features = torch.randn(64, 32, generator=g, requires_grad=True)
    weight = (torch.randn(100, 32, generator=g) * 0.2).requires_grad_()
    targets = torch.randint(0, 100, (64,), generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = head_cross_entropy(features, weight, targets, smoothing, rows=16)
    expected = reference(features, weight, targets, smoothing)
    assert got.dtype == torch.float32
    assert torch.allclose(got, expected, rtol=2e-2)
    for a, b in zip(torch.autograd.grad(got, (features, weight)), torch.autograd.grad(expected, (features, weight))):
        assert a.dtype == torch.float32
        assert (a - b).norm() <= 2e-2 * b.norm()


@pytest.mark.parametrize("rows", [None, 7])
def test_head_cross_entropy_compiled_has_the_eager_gradients(rows):
    """Static shapes keep the fused loss inside the compiled graph: there it must give eager's loss and gradients.
    On torch 2.11 an in-place sum into the returned tensor made every compiled gradient zero (the GPU image's
    torch); eager was right, so only this comparison sees it."""
    g = torch.Generator().manual_seed(2)
    features = torch.randn(40, 16, generator=g, requires_grad=True)
    weight = (torch.randn(30, 16, generator=g) * 0.3).requires_grad_()
    targets = torch.randint(0, 30, (40,), generator=g)
    targets[-4:] = PAD_ID

    def loss(features, weight):
        return head_cross_entropy(features, weight, targets, 0.1, rows, ignore_index=PAD_ID)

    torch._dynamo.reset()
    compiled = torch.compile(loss, dynamic=False, backend="aot_eager")  # AOTAutograd is where it went wrong
    expected, got = loss(features, weight), compiled(features, weight)
    assert torch.allclose(got, expected, rtol=1e-5)
    for a, b in zip(torch.autograd.grad(got, (features, weight)), torch.autograd.grad(expected, (features, weight))):
        assert b.norm() > 0 and torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_head_cross_entropy_without_grad_keeps_no_gradients():
    features, weight = torch.randn(8, 4, requires_grad=True), torch.randn(10, 4, requires_grad=True)
    with torch.no_grad():
        loss = head_cross_entropy(features, weight, torch.zeros(8, dtype=torch.long))
    assert loss.grad_fn is None and torch.isfinite(loss)
    with pytest.raises(ValueError, match="targets"):
        head_cross_entropy(features, weight, torch.zeros(7, dtype=torch.long))


def test_default_loss_blocks_are_bounded_by_logits_and_larger_on_a_gpu():
    """0 rows (train.loss_block_rows' default): 4M logits a block on a CPU, 8x that on a GPU (the H200 profile's
    choice: 4,096 rows at 8k pieces), never under 16 rows whatever the vocabulary."""
    assert block_rows(8000) == 524 and block_rows(8000, "cuda") == 4096
    assert block_rows(32000, "cuda") == 1024 and block_rows(10 ** 9) == 16


@pytest.mark.parametrize("name", ARCHS)
def test_model_loss_equals_cross_entropy_of_its_logits(name):
    """forward(…, targets) is the summed loss of forward(…)'s logits at the kept positions, gradients included."""
    model = make(name).double()
    src = pad([sentence(5, 1), sentence(3, 2)])
    tgt = pad([sentence(4, 3), sentence(6, 4)])
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    keep = tgt_out.ne(PAD_ID)
    expected = F.cross_entropy(model(src, tgt_in, keep), tgt_out[keep], label_smoothing=0.1, reduction="sum")
    expected_grads = torch.autograd.grad(expected, list(model.parameters()), allow_unused=True)
    got = model(src, tgt_in, keep, tgt_out[keep], 0.1)
    got_grads = torch.autograd.grad(got, list(model.parameters()), allow_unused=True)
    assert torch.allclose(got.double(), expected, rtol=1e-7)
    for a, b in zip(expected_grads, got_grads):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, rtol=1e-6, atol=1e-10)


def test_cpu_dropout_rate_scale_and_gradient():
    torch.manual_seed(0)
    x = torch.ones(400, 500, requires_grad=True)
    y = dropout(x, 0.1, training=True)
    kept = y.ne(0)
    assert abs(kept.float().mean().item() - 0.9) < 0.003
    assert torch.allclose(y[kept], torch.full_like(y[kept], 65536 / (65536 - 6554)))
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # d(x·mask·scale)/dx = mask·scale, and x is all ones
    assert torch.equal(dropout(x, 0.1, training=False), x)
    # Columns and rows are independent: the four 16-bit draws of each 64-bit word are not correlated.
    mask = keep_mask(torch.Size([200_000]), 0.5, torch.device("cpu"))[0].view(-1, 4).float()
    assert abs(torch.corrcoef(mask.t())[0, 1:].abs().max().item()) < 0.01


def test_cpu_dropout_follows_the_seed():
    layer = Dropout(0.3).train()
    torch.manual_seed(5)
    a = layer(torch.ones(1000))
    torch.manual_seed(5)
    assert torch.equal(a, layer(torch.ones(1000)))
    with pytest.raises(ValueError):
        Dropout(1.0)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_head_cross_entropy_ignores_pad_targets_as_cross_entropy_does(smoothing):
    g = torch.Generator().manual_seed(3)
    features = torch.randn(40, 16, generator=g, dtype=torch.float64, requires_grad=True)
    weight = (torch.randn(29, 16, generator=g, dtype=torch.float64) * 0.3).requires_grad_()
    targets = torch.randint(0, 29, (40,), generator=g)
    targets[::3] = PAD_ID
    logits = F.linear(features, weight)
    expected = F.cross_entropy(logits, targets, label_smoothing=smoothing, reduction="sum", ignore_index=PAD_ID)
    got = head_cross_entropy(features, weight, targets, smoothing, rows=7, ignore_index=PAD_ID)
    assert torch.allclose(got, expected, rtol=1e-9)
    for a, b in zip(torch.autograd.grad(expected, (features, weight)), torch.autograd.grad(got, (features, weight))):
        assert torch.allclose(a, b, rtol=1e-7, atol=1e-12)
    grad_features = torch.autograd.grad(head_cross_entropy(features, weight, targets, smoothing,
                                                           ignore_index=PAD_ID), features)[0]
    assert grad_features[::3].abs().max() == 0  # an ignored row gets no gradient at all


@pytest.mark.parametrize("name", ARCHS)
def test_a_static_shape_batch_has_the_loss_and_gradients_of_the_tight_one(name):
    """train.length_multiple: padding to a static (rows, width) shape, empty rows included, changes nothing."""
    import numpy as np

    from nmt.data.batching import StaticShapes, collate
    from nmt.data.dataset import ParallelArrays

    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 9, (2, 6))
    arrays = ParallelArrays(rng.integers(4, 30, lengths[0].sum()), np.r_[0, np.cumsum(lengths[0])],
                            rng.integers(4, 30, lengths[1].sum()), np.r_[0, np.cumsum(lengths[1])])
    indices = np.array([4, 1, 3])
    tight, static = collate(arrays, indices), collate(arrays, indices, StaticShapes(8, 64))
    width = 16 if int(lengths[:, indices].max()) + 1 > 8 else 8
    assert static.src.shape == static.tgt_in.shape == (64 // width, width)
    assert len(static.keep) == static.src.numel() and static.tgt_tokens == tight.tgt_tokens
    results, model = [], make(name).double()
    for batch in (tight, static):
        loss = model(batch.src, batch.tgt_in, batch.keep, batch.targets, 0.1)
        results.append((loss, torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)))
    (tight_loss, tight_grads), (static_loss, static_grads) = results
    assert torch.allclose(static_loss, tight_loss, rtol=1e-9)
    for a, b in zip(tight_grads, static_grads):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("name", ["transformer-pre", "transformer-post"])
@pytest.mark.parametrize("static", [False, True], ids=["tight-targets", "static-targets"])
def test_a_packed_batch_has_the_loss_and_gradients_of_the_tight_one(static, name):
    """train.pack_length: several sentences per row, attention kept within each and positions restarting, changes
    neither the loss nor any gradient (fp64, no dropout): the masks leak nothing across sentences."""
    from nmt.data.batching import PackedRows, collate, collate_packed, packed_batches
    from tests.data.test_batching import _arrays

    arrays, src_len, tgt_len = _arrays(n=30, seed=8)
    plan = packed_batches(src_len, tgt_len, pack_length=24, rows=5, seed=2, epoch=0)[0]
    indices = plan.sentences
    packed = collate_packed(arrays, plan, PackedRows(24, 120, static=static))
    assert len(indices) > packed.src.shape[0]  # rows really hold several sentences
    model = make(name).double()
    results = []
    for batch, extra in ((collate(arrays, indices), {}), (packed, {"packing": packed.packing})):
        loss = model(batch.src, batch.tgt_in, batch.keep, batch.targets, 0.1, **extra)
        results.append((loss, torch.autograd.grad(loss, list(model.parameters()))))
    (tight_loss, tight_grads), (packed_loss, packed_grads) = results
    assert torch.allclose(packed_loss, tight_loss, rtol=1e-10)
    for a, b in zip(tight_grads, packed_grads):
        assert torch.allclose(a, b, rtol=1e-8, atol=1e-11)
