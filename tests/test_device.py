import pytest
import torch

from nmt import device
from nmt.device import autocast_dtype, cpu_has_bf16, pick_device
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
