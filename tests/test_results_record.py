"""scripts/results_record.py: a record's command is the command as run, the compiler's environment included."""

import importlib.util
import json
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
spec = importlib.util.spec_from_file_location("results_record", SCRIPTS / "results_record.py")
results_record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(results_record)


def test_the_compiler_s_environment_is_part_of_the_command_and_the_record(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["scripts/bench_train.py", "--steps", "3"])
    monkeypatch.setenv("TORCHINDUCTOR_COORDINATE_DESCENT_TUNING", "1")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/somewhere")  # where caches go changes no figure
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/somewhere/triton")
    results_record.write_record(tmp_path / "r.json", figures=[])
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["command"] == "TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 python scripts/bench_train.py --steps 3"
    assert record["environment"] == {"TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1"}


def test_a_record_without_such_settings_says_none(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["scripts/bench_train.py"])
    for name in list(results_record.measured_environment()):
        monkeypatch.delenv(name)
    results_record.write_record(tmp_path / "r.json", figures=[])
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["command"] == "python scripts/bench_train.py" and "environment" not in record
