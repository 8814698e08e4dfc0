"""The training loss fused with the vocabulary projection: summed, label-smoothed cross-entropy of features (N, E)
against the output matrix (V, E), a block of rows at a time.

Why: with `F.cross_entropy(features @ W.T)` autograd keeps the whole (N, V) logits, their fp32 copy and their
log-softmax for the backward, and the backward writes three more N × V tensors (the one-hot scatter into zeros, the
smoothing term, the log-softmax gradient): at V = 8,000 that was a quarter of a CPU training step and the largest
buffers of it. Here each block's logits live only while the block is processed, and since the loss is a sum, its
gradients with respect to the features and to W are computed right there in the forward (as in fused linear
cross-entropy kernels such as Liger's); the backward only scales them by the incoming gradient.

Per row i with target t, logits z and ε = label_smoothing (PyTorch's definition of label smoothing):
    loss_i = logsumexp(z) − (1 − ε)·z_t − (ε/V)·Σ_v z_v
    ∂loss_i/∂z_v = softmax(z)_v − (1 − ε)·[v = t] − ε/V
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Logit elements per block (rows × vocabulary), whatever the vocabulary size. On a CPU 4M fp32 values = 16 MiB, which
# keeps training's memory low. A GPU has room for 8× that: 4,096 rows at 8k pieces (131 MB in fp32), so that a block's
# three products are large and few blocks add into the output matrix's fp32 gradient. On an H200 the 32,768-token
# update of transformer.yaml took 61.5 ms against 67.2 ms at the CPU's 524 rows (profiled kernel by kernel:
# results/gpu-profile-transformer-32k-loss-blocks4096-h200.json against results/gpu-profile-transformer-32k-h200.json).
BLOCK_ELEMENTS = 1 << 22
GPU_BLOCK_ELEMENTS = 4096 * 8000


def block_rows(vocab_size: int, device_type: str = "cpu") -> int:
    elements = GPU_BLOCK_ELEMENTS if device_type == "cuda" else BLOCK_ELEMENTS
    return max(16, elements // max(vocab_size, 1))


def _block_loss_and_logit_grad(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float,
                               want_grad: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """logits (n, V) fp32 → (per-row loss (n,), ∂loss/∂logits or None); the gradient reuses the logits' storage.

    The softmax is made in place (z − max, exp, ÷ sum): no second (n, V) buffer, one exp per logit."""
    vocab = logits.shape[1]
    linear = (1.0 - label_smoothing) * logits.gather(1, targets.unsqueeze(1)).squeeze(1)
    if label_smoothing:
        linear = linear + label_smoothing / vocab * logits.sum(dim=1)
    if not want_grad:
        return torch.logsumexp(logits, dim=1) - linear, None
    peak = logits.amax(dim=1, keepdim=True)
    exp = logits.sub_(peak).exp_()  # the logits are not needed any more
    total = exp.sum(dim=1, keepdim=True)
    loss = (total.log() + peak).squeeze(1) - linear
    grad = exp.div_(total)  # softmax
    if label_smoothing:
        grad.sub_(label_smoothing / vocab)
    grad.scatter_add_(1, targets.unsqueeze(1), grad.new_full((len(targets), 1), label_smoothing - 1.0))
    return loss, grad


class _HeadCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, label_smoothing: float,
                rows: int, ignore_index: int | None) -> torch.Tensor:
        want_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        # Under autocast F.linear runs in the autocast type (bf16 on the tensor cores); the softmax in fp32.
        compute_dtype = torch.get_autocast_dtype(features.device.type) \
            if torch.is_autocast_enabled(features.device.type) else weight.dtype
        softmax_dtype = torch.promote_types(weight.dtype, torch.float32)  # fp32, or fp64 where the weights are
        counted = None  # rows that count (1) or are ignored (0), as a factor; decided on the device
        if ignore_index is not None:
            counted = targets.ne(ignore_index)
            targets = targets.masked_fill(~counted, 0)  # any valid id: the row's loss and gradient are zeroed
            counted = counted.to(compute_dtype).unsqueeze(1)
        total = features.new_zeros((), dtype=softmax_dtype)
        grad_features = torch.empty_like(features) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros_like(weight, dtype=softmax_dtype) if ctx.needs_input_grad[1] else None
        w = weight.to(compute_dtype)
        for start in range(0, len(features), rows):
            block = features[start:start + rows].to(compute_dtype)
            logits = F.linear(block, w).to(softmax_dtype)
            loss, grad = _block_loss_and_logit_grad(logits, targets[start:start + rows], label_smoothing, want_grad)
            if counted is not None:
                # An ignored row: no loss, and no gradient (its features' rows zeroed on both sides of the matmuls,
                # (n, E) work instead of masking the (n, V) gradient).
                keep = counted[start:start + rows]
                loss, block = loss * keep.squeeze(1).to(loss.dtype), block * keep
            # Out of place: under torch.compile on torch 2.11 an in-place sum into the returned tensor left every
            # gradient zero (the output lost its link to this Function's backward); 2.13 was right either way.
            total = total + loss.sum()
            if grad is not None:
                grad = grad.to(compute_dtype)
                if grad_features is not None:
                    grad_features[start:start + rows] = grad @ w if counted is None else (grad @ w) * keep
                if grad_weight is not None:
                    grad_weight += grad.t() @ block
        ctx.save_for_backward(grad_features, grad_weight)
        ctx.weight_dtype = weight.dtype
        return total

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        grad_features, grad_weight = ctx.saved_tensors
        if grad_features is not None:
            grad_features = grad_features * grad_output.to(grad_features.dtype)
        if grad_weight is not None:
            grad_weight = (grad_weight * grad_output).to(ctx.weight_dtype)
        return grad_features, grad_weight, None, None, None, None


def head_cross_entropy(features: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                       label_smoothing: float = 0.0, rows: int | None = None,
                       ignore_index: int | None = None) -> torch.Tensor:
    """Σ_i cross-entropy(features_i @ weight.T, targets_i) with label smoothing, as `F.cross_entropy(...,
    reduction="sum", label_smoothing=..., ignore_index=...)` of the full logits, without ever holding them.
    features (N, E), weight (V, E), targets (N,) int64 → a scalar (fp32; fp64 for fp64 weights). Differentiable in
    features and weight. Rows whose target is `ignore_index` add nothing (static-shape batches' padding)."""
    if features.dim() != 2 or targets.shape != features.shape[:1]:
        raise ValueError(f"features (N, E) and targets (N,) expected, got {tuple(features.shape)} and "
                         f"{tuple(targets.shape)}")
    return _HeadCrossEntropy.apply(features, weight, targets, float(label_smoothing),
                                   rows or block_rows(weight.shape[0], weight.device.type), ignore_index)
