"""train.packed_attention flex: packed rows' attention through FlexAttention gives SDPA's (masked) attention."""

import pytest
import torch

from nmt.models.flex_masks import flex_attention_available
from tests_helpers import make_model

pytestmark = pytest.mark.skipif(not flex_attention_available(), reason="FlexAttention needs torch >= 2.5")


@pytest.mark.parametrize("pre_norm", [True, False], ids=["pre-LN", "post-LN"])
def test_flex_attention_on_packed_rows_gives_the_masked_sdpa_loss(pre_norm):
    """The encoder's, the decoder's (causal) and the cross-attention's rules, padding included, evaluated inside
    FlexAttention from the segment ids: the loss of the same packed batch as with SDPA's mask tensors. Forward only:
    FlexAttention has no backward on a CPU (the CUDA test trains with it)."""
    from nmt.data.batching import PackedRows, collate_packed, packed_batches
    from tests.data.test_batching import _arrays

    arrays, src_len, tgt_len = _arrays(n=60, seed=8)
    plan = packed_batches(src_len, tgt_len, pack_length=128, rows=3, seed=2, epoch=0)[0]
    packed = collate_packed(arrays, plan, PackedRows(128, 384, static=True))
    assert len(plan.sentences) > 3 * packed.src.shape[0]  # several sentences a row
    assert (packed.packing.src_segments < 0).any()  # padding's rules are exercised too
    model = make_model("transformer", pre_norm=pre_norm).eval()
    losses = {}
    with torch.no_grad():
        for kernel in ("sdpa", "flex"):
            model.packed_attention = kernel
            losses[kernel] = model(packed.src, packed.tgt_in, packed.keep, packed.targets, 0.1,
                                   packing=packed.packing)
    assert losses["flex"].item() == pytest.approx(losses["sdpa"].item(), rel=1e-5)
