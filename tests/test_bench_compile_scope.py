"""scripts/bench_compile_scope.py: the lease trains the compile scope that reaches its target update count first."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from bench_compile_scope import winner  # noqa: E402

# First update (compile included) and warm update, as the bench records them: eager kernels start at once but run
# slower; the whole model compiles longest.
RECORD = {"figures": [{"scope": "eager", "first_update_s": 0.4, "update_ms": 22.5},
                      {"scope": "layers", "first_update_s": 15.0, "update_ms": 15.9},
                      {"scope": "model", "first_update_s": 50.0, "update_ms": 15.6}]}


@pytest.mark.parametrize("updates, settings", [
    (3000, ["train.compile=true", "train.compile_scope=layers"]),  # 62.7 s against 67.9 (eager) and 96.8 (model)
    (1000, ["train.compile=false"]),  # too few updates to earn back any compile
    (1_000_000, ["train.compile=true", "train.compile_scope=model"]),  # the warm rate decides a long run
])
def test_the_scope_first_to_the_target_update_wins(updates, settings):
    assert winner(RECORD, updates) == settings
