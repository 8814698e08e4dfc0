import pytest
import torch
import torch.nn.functional as F

from nmt import device
from nmt.device import (autocast, autocast_dtype, cpu_has_bf16, oversubscribed_threads_warning, pick_device,
                        training_attention_kernels, usable_cpus)
from nmt.errors import NMTError


def test_cpu_bf16_is_chosen_only_with_native_instructions(monkeypatch):
    assert cpu_has_bf16("flags : fpu avx2 avx512f avx512_bf16") and cpu_has_bf16("flags : amx_bf16 amx_tile")
    assert not cpu_has_bf16("flags : fpu sse4_2 avx2 fma")
    cpu = torch.device("cpu")
    monkeypatch.setattr(device, "cpu_has_bf16", lambda: True)
    assert autocast_dtype("auto", cpu) is torch.bfloat16
    monkeypatch.setattr(device, "cpu_has_bf16", lambda: False)
    assert autocast_dtype("auto", cpu) is None
    assert autocast_dtype("bf16", cpu) is torch.bfloat16  # asked for explicitly: allowed, even if emulated
    with pytest.raises(NMTError, match="fp16 needs a CUDA device"):
        autocast_dtype("fp16", cpu)


def test_unknown_or_missing_devices_are_clear_errors():
    with pytest.raises(NMTError, match="unknown device 'tpu'"):
        pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(NMTError, match="no CUDA device"):
            pick_device("cuda")


def test_a_gpu_process_keeps_sdpa_off_cudnn_unless_asked(monkeypatch):
    """cuDNN attention builds a graph per new shape, and decoding meets a new shape every step (nmt.device); the
    choice is SDPA's global setting, so the test puts it back."""
    enabled = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        monkeypatch.setenv(device.CUDNN_ATTENTION_ENV, "1")
        assert not device.avoid_cudnn_attention() and torch.backends.cuda.cudnn_sdp_enabled()
        monkeypatch.delenv(device.CUDNN_ATTENTION_ENV)
        assert device.avoid_cudnn_attention() and not torch.backends.cuda.cudnn_sdp_enabled()
        if torch.cuda.is_available():  # what every GPU path goes through
            torch.backends.cuda.enable_cudnn_sdp(True)
            pick_device("auto")
            assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(enabled)


def attention_ops(dtype: torch.dtype | None) -> set[str]:
    """The ops one attention forward and backward on the CPU ran under `training_attention_kernels`."""
    cpu = torch.device("cpu")
    q, k, v = (torch.randn(2, 2, 5, 8, requires_grad=True) for _ in range(3))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        with autocast(cpu, dtype), training_attention_kernels(cpu, dtype):
            F.scaled_dot_product_attention(q, k, v).float().sum().backward()
    return {event.name for event in profile.events()}


def test_cpu_bf16_training_attention_takes_the_math_kernel():
    """The flash kernel's backward is slow on a CPU in bf16: a training step there attends with matmuls and a
    softmax instead (whatever this CPU's ISA: bf16 autocast runs everywhere, emulated where not native)."""
    ops = attention_ops(torch.bfloat16)
    assert not any("flash" in name for name in ops) and "aten::_softmax" in ops
    assert any("_softmax_backward" in name for name in ops)


@pytest.mark.parametrize("dtype, kernel_device", [(None, "cpu"), (torch.bfloat16, "cuda")])
def test_elsewhere_sdpa_keeps_its_own_choice(dtype, kernel_device):
    with training_attention_kernels(torch.device(kernel_device), dtype):
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.cuda.flash_sdp_enabled()  # nothing left switched off after a bf16 CPU step either
    with training_attention_kernels(torch.device("cpu"), torch.bfloat16):
        assert not torch.backends.cuda.flash_sdp_enabled()
    assert torch.backends.cuda.flash_sdp_enabled()


def test_a_gpu_context_is_made_on_a_thread_and_a_failure_there_is_left_to_the_main_thread(monkeypatch):
    """A CPU makes no context; where the GPU's context cannot be made (no CUDA here, or a broken driver), the thread
    ends quietly: the main thread's first CUDA call meets the same error and reports it as it always did."""
    assert device.context_in_background(torch.device("cpu")) is None
    touched = []
    real_zeros = torch.zeros

    def zeros(*args, **kwargs):
        touched.append(kwargs.get("device"))
        if torch.device(kwargs["device"]).type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("Torch not compiled with CUDA enabled")
        return real_zeros(*args, **kwargs)

    monkeypatch.setattr(torch, "zeros", zeros)
    failures = []
    monkeypatch.setattr("threading.excepthook", failures.append)
    thread = device.context_in_background(torch.device("cuda", 0))
    thread.join(timeout=30)
    assert not thread.is_alive() and thread.daemon and not failures
    assert touched == [torch.device("cuda", 0)]


@pytest.mark.parametrize("native", [True, False], ids=["native-bf16", "emulated-bf16"])
def test_bf16_autocast_on_a_cpu_without_native_bf16_runs_an_lstm_without_onednn(monkeypatch, native):
    """On an AVX2-only CPU, torch hands a bf16 LSTM to oneDNN, which cannot run it there ("could not create a
    primitive descriptor"): autocast() turns oneDNN off inside, and back on after; with native bf16 it stays on."""
    monkeypatch.setattr(device, "cpu_has_bf16", lambda: native)
    lstm, inputs = torch.nn.LSTM(8, 8, batch_first=True), torch.randn(2, 3, 8)
    assert torch.backends.mkldnn.enabled
    with autocast(torch.device("cpu"), torch.bfloat16):
        assert torch.is_autocast_enabled("cpu") and torch.backends.mkldnn.enabled is native
        if not native:
            outputs, _ = lstm(inputs)
    assert torch.backends.mkldnn.enabled and not torch.is_autocast_enabled("cpu")
    if not native:
        outputs.float().sum().backward()
        assert lstm.weight_hh_l0.grad.abs().sum() > 0


def test_only_bf16_on_a_cpu_without_native_bf16_counts_as_emulated(monkeypatch):
    from nmt.device import emulated_bf16

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(device, "cpu_has_bf16", lambda: False)
    assert emulated_bf16(cpu, torch.bfloat16)
    assert not emulated_bf16(cpu, None) and not emulated_bf16(cuda, torch.bfloat16)
    monkeypatch.setattr(device, "cpu_has_bf16", lambda: True)
    assert not emulated_bf16(cpu, torch.bfloat16)


def test_threads_past_the_usable_cpus_are_warned_of_and_the_affinity_counts(monkeypatch):
    assert oversubscribed_threads_warning(2, 2) == "" and oversubscribed_threads_warning(1, 4) == ""
    said = oversubscribed_threads_warning(8, 2)
    assert said.startswith("train.threads 8 is more than the 2 CPUs this process may use")
    assert "(train.threads: 2, or 0" in said
    assert "the 1 CPU this" in oversubscribed_threads_warning(2, 1)
    monkeypatch.setattr(device.os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert usable_cpus() == 1  # a container's or taskset's share, not the machine's count


@pytest.mark.parametrize("files,quota", [
    ({"cpu.max": "max 100000\n"}, None), ({"cpu.max": "150000 100000\n"}, 2), ({"cpu.max": "50000 100000\n"}, 1),
    ({"cpu.max": "garbled"}, None),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2), ({}, None),
])
def test_a_containers_cpu_quota_counts_as_its_cpus(monkeypatch, tmp_path, files, quota):
    """`docker run --cpus=2` on a 64-core host leaves the affinity at 64 and sets a CFS quota of 2 CPUs (cgroup v2's
    cpu.max, v1's cfs_quota_us / cfs_period_us): torch's default of 64 threads then waits on the throttle."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(device, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(device, "PROC_CGROUP", tmp_path / "no-such-file")
    assert device.cpu_quota() == quota
    monkeypatch.setattr(device.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert usable_cpus() == (quota or 64)


def test_an_engine_on_a_cpu_caps_torchs_default_threads_at_the_usable_cpus(toy_transformer_run, monkeypatch):
    """As training does: `nmt translate`, `evaluate` and `serve` in a container with a CPU quota of 1 decoded with
    one thread per CPU of the host."""
    from nmt.engines import open_engine

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        monkeypatch.setattr(device, "usable_cpus", lambda: 1)
        open_engine("nmt", toy_transformer_run, device="cpu")
        assert torch.get_num_threads() == 1
        assert device.cap_threads_at_usable_cpus() is None  # within the CPUs: left alone
    finally:
        torch.set_num_threads(threads)


def test_the_tightest_quota_from_the_processs_own_cgroup_up_counts(monkeypatch, tmp_path):
    """cgroup v2 without a namespace of its own (a systemd unit's CPUQuota, older Docker): the quota sits in the
    process's cgroup folder (/proc/self/cgroup's "0::/path") or one above it, not at /sys/fs/cgroup."""
    (tmp_path / "system.slice" / "nmt.service").mkdir(parents=True)
    (tmp_path / "system.slice" / "nmt.service" / "cpu.max").write_text("max 100000\n")
    (tmp_path / "system.slice" / "cpu.max").write_text("300000 100000\n")
    (tmp_path / "cpu.max").write_text("800000 100000\n")
    (tmp_path / "self-cgroup").write_text("1:cpu:/\n0::/system.slice/nmt.service\n")
    monkeypatch.setattr(device, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(device, "PROC_CGROUP", tmp_path / "self-cgroup")
    assert device.cpu_quota() == 3
    (tmp_path / "self-cgroup").write_text("0::/\n")
    assert device.cpu_quota() == 8
