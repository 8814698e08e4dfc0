"""Model FLOPs for MFU: the analytic count agrees with torch's FLOP counter where it can see every matmul."""

import time

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from nmt.throughput import GPU_PEAK_TFLOPS, StepTimer, ThroughputWindow, UpdateFlops
from tests_helpers import make_model


def test_transformer_forward_flops_match_the_flop_counter():
    model = make_model("transformer").eval()
    src = torch.randint(4, 40, (3, 7))
    tgt = torch.randint(4, 40, (3, 5))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(src, tgt)
    per_src, per_tgt = model.forward_flops(7, 5)
    analytic = per_src * src.numel() + per_tgt * tgt.numel()
    # QK^T and AV (2·2·B·Q·K·d) per attention: encoder self, decoder self (causal, counted whole), cross.
    batch, s, t, d, layers = 3, 7, 5, 32, 2
    attention = layers * 4 * batch * d * (s * s + t * t + t * s)
    # The counter sees every linear layer; SDPA's CPU kernel only from torch 2.15 on (before, it counts 0 there).
    counted_sdpa = sum(flops for op, flops in counter.get_flop_counts()["Global"].items()
                       if "scaled_dot_product" in str(op))
    assert counted_sdpa in (0, attention)
    assert analytic == counter.get_total_flops() - counted_sdpa + attention


@pytest.mark.parametrize("arch", ["seq2seq", "bahdanau", "luong"])
def test_recurrent_flops_are_positive_and_grow_with_tokens(arch):
    model = make_model(arch)
    flops = UpdateFlops(model)
    assert 0 < flops(70, 50, 10) < flops(140, 100, 20)


def test_window_reports_and_resets():
    window = ThroughputWindow(peak_flops=1e12)
    window.add(loss_sum=20.0, src_tokens=100, tgt_tokens=10, flops=1e9)
    figures = window.report(world_size=1)
    assert figures["loss"] == 2.0 and figures["tokens_per_s"] > 0 and 0 < figures["mfu"]
    assert window.tgt_tokens == 0 and window.flops == 0.0
    assert GPU_PEAK_TFLOPS["H100"] == 989.0


def test_a_window_counts_its_skipped_updates_and_averages_the_loss_over_the_others():
    """Under train.nonfinite_loss: skip a skipped update adds no loss but its tokens: the window's loss came out too
    low, and 0.000 for a window of skipped updates alone, with no word that any was skipped."""
    window = ThroughputWindow(peak_flops=1e12)
    window.add(loss_sum=torch.tensor(20.0), src_tokens=100, tgt_tokens=10, flops=1e9, applied=torch.tensor(True))
    window.add(loss_sum=torch.tensor(0.0), src_tokens=100, tgt_tokens=30, flops=1e9, applied=torch.tensor(False))
    figures = window.report(world_size=1)
    assert figures["loss"] == 2.0 and figures["skipped_updates"] == 1 and figures["updates"] == 2
    window.add(loss_sum=torch.tensor(0.0), src_tokens=100, tgt_tokens=30, flops=1e9, applied=torch.tensor(False))
    figures = window.report(world_size=1)
    assert figures["loss"] is None and figures["skipped_updates"] == 1
    window.add(loss_sum=4.0, src_tokens=1, tgt_tokens=2, flops=1.0)  # applied unless said otherwise
    assert window.report(world_size=1)["skipped_updates"] == 0


@pytest.mark.parametrize("arch", ["seq2seq", "bahdanau", "luong", "transformer"])
def test_update_flops_counted_once_matches_the_model_count(arch):
    model = make_model(arch)
    counted = UpdateFlops(model)
    for src_tokens, tgt_tokens, sentences in [(70, 50, 10), (3, 900, 7), (1234, 17, 40)]:
        per_src, per_tgt = model.forward_flops(src_tokens / sentences, tgt_tokens / sentences)
        expected = 3.0 * (per_src * src_tokens + per_tgt * tgt_tokens)
        assert counted(src_tokens, tgt_tokens, sentences) == pytest.approx(expected, rel=1e-9)


def test_a_gpus_peak_is_the_one_of_the_precision_training_uses(monkeypatch):
    """Issue 15: MFU against the peak of the precision actually used. A GPU's table holds 16-bit tensor-core
    peaks; fp32 training (a fraction of them) is measured instead. No GPU is needed: the name and the measurement
    are stand-ins."""
    import nmt.throughput as throughput

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    monkeypatch.setattr(throughput, "measured_matmul_tflops", lambda device, dtype=None: 51.0)
    cuda = torch.device("cuda", 0)
    assert throughput.peak_tflops(cuda, dtype=torch.bfloat16) == (756.0, "bfloat16 peak of NVIDIA H100 PCIe")
    assert throughput.peak_tflops(cuda, dtype=torch.float16)[0] == 756.0
    assert throughput.peak_tflops(cuda, dtype=None) == (51.0, "measured fp32 matmul")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert throughput.peak_tflops(cuda, dtype=torch.bfloat16)[0] == 989.0
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some Future GPU")
    assert throughput.peak_tflops(cuda, dtype=torch.bfloat16) == (51.0, "measured bfloat16 matmul")
    assert throughput.peak_tflops(cuda, 400.0, torch.bfloat16) == (400.0, "train.peak_tflops")


def test_the_cpus_measured_peak_is_in_the_training_precision():
    from nmt.throughput import measured_matmul_tflops, peak_tflops

    peak, source = peak_tflops(torch.device("cpu"), dtype=None)
    assert source == "measured fp32 matmul" and peak > 0
    assert measured_matmul_tflops(torch.device("cpu"), size=64, seconds=0.01) > 0


def test_the_measured_peak_is_the_fastest_window_not_the_mean(monkeypatch):
    """Another process on the cores for a moment slows one window of the start-up probe, not the peak. A fake clock
    makes it exact: each matmul takes 1 ms, except in the first window, stalled, where each takes 100 ms."""
    import types

    import nmt.throughput as throughput

    clock = {"now": 0.0, "matmuls": 0}

    def synchronize(device):  # called once per matmul on a CPU (a burst of 1)
        clock["matmuls"] += 1
        clock["now"] += 0.1 if clock["matmuls"] <= 2 else 0.001  # the warm-up's and the first window's matmul
    monkeypatch.setattr(throughput, "synchronize", synchronize)
    monkeypatch.setattr(throughput, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))
    size = 16
    peak = throughput.measured_matmul_tflops(torch.device("cpu"), size=size, seconds=0.06, windows=3)
    assert peak == pytest.approx(2 * size**3 / 0.001 / 1e12)


def test_the_probe_shrinks_its_products_to_fit_a_window():
    """A CPU without native bf16 took 2.4 s for one 1024² bf16 product and 0.025 s at 256² (an AVX2 EPYC): the
    probe's windows then hold products of 256², not seven products of seconds each at start-up. fp32 there (0.6 ms
    at 256²) keeps 1024²."""
    from nmt.throughput import fitting_size

    assert fitting_size(1024, 256, 0.025, window=0.05) == 256
    assert fitting_size(1024, 256, 0.0006, window=0.05) == 1024
    assert fitting_size(1024, 256, 0.004, window=0.05) == 512  # 0.032 s at 512², 0.256 s at 1024²
    assert fitting_size(1024, 256, 10.0, window=0.05) == 256  # never below the size timed


def test_step_timer_splits_phases_and_blocked_seconds_and_resets():
    timer = StepTimer(torch.device("cpu"))
    started = time.perf_counter()
    timer.phase("forward")
    time.sleep(0.02)
    timer.phase("optimizer")
    time.sleep(0.01)
    timer.phase(None)
    time.sleep(0.05)  # between phases (e.g. a validation): not counted
    with timer.blocked():
        time.sleep(0.015)
    first = timer.report()
    wall = time.perf_counter() - started
    assert set(first) == {"data_s", "forward_s", "backward_s", "sync_s", "optimizer_s", "host_blocked_s"}
    assert first["forward_s"] >= 0.02 and first["optimizer_s"] >= 0.01 and first["host_blocked_s"] >= 0.015
    assert first["data_s"] == first["backward_s"] == 0.0
    # Sleeps only lengthen under load; the 50 ms between phases is never counted, and the wait is not a phase
    # (2 ms: the rounding of three figures to milliseconds).
    assert first["forward_s"] + first["optimizer_s"] <= wall - 0.05 - first["host_blocked_s"] + 0.002
    assert all(value == 0.0 for value in timer.report().values())  # a new window starts empty


def test_a_measured_peak_is_measured_again_and_the_fastest_reading_stands(monkeypatch):
    """A process sharing the cores during the start-up measurement read the peak low for the whole run (a 2-core
    make demo beside a linter logged ~120% MFU against it): the first log windows measure it again."""
    import nmt.throughput as throughput

    readings = iter([0.5, 1.0, 1.03, 0.4, 9.0])
    monkeypatch.setattr(throughput, "measured_matmul_tflops", lambda device, dtype=None: next(readings))
    peak = throughput.TrainingPeak.of(torch.device("cpu"), 0.0, None)
    assert (peak.tflops, peak.source, peak.measurements_left) == (0.5, "measured fp32 matmul",
                                                                  throughput.MEASURED_AGAIN)
    assert peak.measure_again() == 0.5 and peak.tflops == 1.0  # twice the start-up reading: said
    assert peak.measure_again() is None and peak.tflops == 1.03  # within 5%: kept, in silence
    assert peak.measure_again() is None and peak.tflops == 1.03  # a slower reading changes nothing
    assert peak.measure_again() is None and peak.tflops == 1.03  # no more measurements: 9.0 never read
    assert next(readings) == 9.0


def test_a_configured_or_tabled_peak_is_not_measured_again(monkeypatch):
    import nmt.throughput as throughput

    monkeypatch.setattr(throughput, "measured_matmul_tflops", lambda device, dtype=None: pytest.fail("measured"))
    peak = throughput.TrainingPeak.of(torch.device("cpu"), 123.0, None)
    assert peak.measure_again() is None and (peak.tflops, peak.source) == (123.0, "train.peak_tflops")


def test_training_reports_mfu_against_the_peak_measured_again(tmp_path, toy_data_dir, monkeypatch):
    """The first window's MFU is against the start-up peak, the next ones against the faster reading after it, and
    each train record names the peak it is relative to."""
    import nmt.throughput as throughput
    from nmt.config import load_config
    from nmt.run_dir import Run
    from nmt.train import train
    from tests_helpers import TOY_RUN, write_config

    readings = iter([1e-3, 4e-3, 4e-3, 4e-3])
    monkeypatch.setattr(throughput, "measured_matmul_tflops", lambda device, dtype=None: next(readings))
    # fp32 pinned: on a CPU with native bf16, precision auto would train (and name its peak) in bf16.
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={"max_steps": 25, "eval_every": 100,
                                                                  "precision": "fp32"}))
    said = []
    train(cfg, tmp_path / "run", toy_data_dir, log=said.append)
    windows = [r for r in Run(tmp_path / "run").metrics.records() if r["type"] == "train"]
    assert [r["peak_tflops"] for r in windows] == [1e-3, 4e-3, 4e-3, 4e-3, 4e-3]
    assert "MFU relative to 0.004 TFLOP/s from step 5: the measured fp32 matmul again (at start-up 0.001: " \
           "something else ran on the device then)" in said
    assert sum("MFU relative to" in line for line in said) == 2  # the start-up line and the one rise
