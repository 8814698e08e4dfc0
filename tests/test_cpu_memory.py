"""A CPU training process's memory kept flat: freed heap pages handed back, oneDNN's kernel cache bounded."""

import ctypes
import os

import pytest

from nmt import cpu_memory
from nmt.cpu_memory import HeapTrimmer, limit_onednn_cache, resident_bytes

MIB = 2**20


def test_the_trimmer_trims_only_past_one_working_set_plus_the_slack(monkeypatch):
    resident, trims = [1000 * MIB], []
    monkeypatch.setattr(cpu_memory, "resident_bytes", lambda: resident[0])
    trimmer = HeapTrimmer(slack_bytes=100 * MIB)
    trimmer.malloc_trim = lambda pad: trims.append(pad) or 1

    def after_update(mib):
        resident[0] = mib * MIB
        return trimmer()

    assert not after_update(1500)  # the first update: its working set sets the baseline
    assert not after_update(1600)  # grown by the slack, not past it
    assert after_update(1601) and trims == [0] and trimmer.trims == 1
    assert not after_update(1700)  # the first update after a trim sets the baseline again
    assert not after_update(1790)
    assert after_update(1801) and trimmer.trims == 2
    assert trimmer(force=True) and trimmer.trims == 3  # before validation: whatever the growth


def test_the_trimmer_does_nothing_where_it_cannot_trim(monkeypatch):
    monkeypatch.setattr(cpu_memory, "_glibc_malloc_trim", lambda: None)
    trimmer = HeapTrimmer()
    assert not trimmer() and not trimmer(force=True) and trimmer.trims == 0


@pytest.mark.skipif(cpu_memory._glibc_malloc_trim() is None or resident_bytes() is None,
                    reason="needs Linux with glibc")
def test_freed_heap_pages_go_back_to_the_os():
    """What glibc does to training's activations, and what trimming undoes: blocks freed in the middle of the heap
    stay resident until malloc_trim hands their pages back."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(libc.malloc(8 * MIB))  # a freed mmapped block raises the mmap threshold: 1 MiB blocks use the heap
    blocks = [libc.malloc(MIB) for _ in range(320)]
    for block in blocks:
        ctypes.memset(block, 1, MIB)  # resident
    for block in blocks[::2]:  # every other one: each freed block lies between live ones, so none joins the top
        libc.free(block)
    held = resident_bytes()
    trimmer = HeapTrimmer()
    assert trimmer(force=True)
    released = held - resident_bytes()
    for block in blocks[1::2]:
        libc.free(block)
    assert released > 100 * MIB, f"only {released / MIB:.0f} MiB of 160 went back"


def test_oneDNN_cache_is_bounded_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    limit_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(cpu_memory.ONEDNN_CACHE_CAPACITY)
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1024")
    limit_onednn_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "1024"
