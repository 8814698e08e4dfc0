"""scripts/profile_update.py: where a training update's device time goes, by kernel category."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from profile_update import breakdown, busy_seconds, category, device_kernels, profile_updates  # noqa: E402


@pytest.mark.parametrize("name, expected", [
    # cuBLAS on an H100, PyTorch's memory-efficient and flash attention, inductor's fused kernels, fused AdamW
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "matmul"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "matmul"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)", "attention"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64>>", "attention"),
    ("triton_per_fused__to_copy_add_native_dropout_native_layer_norm_3", "normalization"),
    ("triton_poi_fused_native_dropout_relu_7", "dropout"),
    ("triton_poi_fused_add_mul_12", "elementwise"),
    ("triton_red_fused_sum_4", "reduction"),
    ("triton_tem_fused_mm_0", "matmul"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", "optimizer"),
    ("Memcpy HtoD (Pinned -> Device)", "copy/fill"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float>", "softmax/loss"),
    # as the H200's eager profile named them: LayerNorm's weight gradient, dropout's scaling
    ("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float, 32u, 32u, 256u>",
     "normalization"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::(anonymous namespace)::masked_scale_kernel<bool, "
     "c10::BFloat16, float>>", "dropout"),
    # the CPU's operators
    ("aten::addmm", "matmul"), ("aten::_fused_adamw_", "optimizer"), ("aten::native_layer_norm", "normalization"),
    ("aten::mul", "elementwise"), ("_HeadCrossEntropy", "other"),
])
def test_kernels_and_operators_fall_in_their_category(name, expected):
    assert category(name) == expected


def test_overlapping_kernels_count_once_and_gaps_not_at_all():
    assert busy_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.7)]) == pytest.approx(4.0)
    assert busy_seconds([]) == 0.0


def test_a_chrome_trace_gives_its_device_events_only():
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "ts": 10, "dur": 5},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 16, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 9, "dur": 3},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 8, "dur": 1},
        {"ph": "i", "cat": "kernel", "name": "marker", "ts": 9}]}
    assert [e["name"] for e in device_kernels(trace)] == ["nvjet_gemm", "Memcpy HtoD"]


def test_the_breakdown_is_per_update_and_its_shares_add_up():
    rows = [("nvjet_a", 0.004, 4), ("nvjet_b", 0.002, 2), ("triton_poi_fused_add_0", 0.002, 8)]
    result = breakdown(rows, updates=2, top=2)
    assert result["ms_per_update"] == pytest.approx(4.0)
    assert result["categories"]["matmul"] == {"ms_per_update": 3.0, "share": 0.75, "per_update": 3.0}
    assert result["categories"]["elementwise"]["per_update"] == 4.0
    assert list(result["categories"]) == ["matmul", "elementwise"]  # the largest first
    assert [row["name"] for row in result["top"]] == ["nvjet_a", "nvjet_b"]


def test_a_cpu_update_is_profiled_by_category(toy_data_dir):
    from nmt.config import load_config
    from tests_helpers import TOY_RUN, write_config

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(write_config(Path(tmp), base=TOY_RUN, model={"num_layers": 1},
                                       train={"precision": "fp32"}))
        figures = profile_updates(cfg, toy_data_dir, warmup=1, updates=3)
    assert figures["updates"] == 3 and figures["device"] == "cpu"
    assert "device_idle_share" not in figures  # a CPU has no kernels of its own to leave gaps between
    categories = figures["categories"]
    assert categories["matmul"]["ms_per_update"] > 0 and categories["optimizer"]["ms_per_update"] > 0
    assert sum(row["share"] for row in categories.values()) == pytest.approx(1.0, abs=1e-3)
    assert 0 < figures["mfu_profiled"] < figures["mfu_if_only_counted_kernels_ran"]
