"""scripts/demo_runs.py: the run-by-run table of `make demo` in docs/results.md, read from records of every vintage."""

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "demo_runs.py"


def _script():
    spec = importlib.util.spec_from_file_location("demo_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _record(results: Path, name: str, date: str, commit: str, **figures) -> None:
    (results / name).write_text(json.dumps({"command": "make demo", "commit": commit, "date": date,
                                            "device": "CPU", "figures": figures}))


def test_runs_of_every_record_vintage_are_read_and_experiments_left_out(tmp_path):
    demo_runs = _script()
    _record(tmp_path, "demo-en-fr-cpu-avx2.json", "2026-11-24T10:00:00", "68639ad", steps=1499,
            make_demo_wall_clock_s=531, median_train_tokens_per_s=6692.4, test_bleu_beam5=34.72, test_chrf=54.14)
    _record(tmp_path, "demo-en-fr-cpu-bf16-04c66b0.json", "2026-12-02T10:18:00", "04c66b0", steps_at_budget=3013,
            make_demo_wall="8 min 9 s from a fresh clone", median_train_tokens_per_s=13123.1, test_bleu_beam5=44.81,
            test_bleu_ci95=1.51, test_chrf=61.67)
    _record(tmp_path, "demo-en-fr-cpu-amx-c56ccfe.json", "2026-11-25T09:00:00", "c56ccfe", final_step=2822,
            test_bleu_beam5=44.23)
    _record(tmp_path, "demo-en-fr-cpu-avx2-emulated-1fd0a74.json", "2026-11-25T09:00:00", "1fd0a74", steps=1985,
            test_bleu_beam5=40.15)
    _record(tmp_path, "demo-en-fr-cpu-bf16-nobleu.json", "2026-11-25T09:00:00", "0000000", steps=10)
    _record(tmp_path, "demo-en-fr-cpu.json", "2026-11-23T09:00:00", "e0e0e0e", steps=980,
            test_bleu_beam5_fp32_decoding=31.03, test_bleu_beam5_bf16_decoding=31.08)

    # Later that day than 04c66b0's run, though its name sorts first: the hour orders runs of one day.
    _record(tmp_path, "demo-en-fr-cpu-avx2-95cce81.json", "2026-12-02T17:14:07+00:00", "95cce81", steps_at_budget=1003,
            make_demo_wall_s=595.4, test_bleu_beam5=30.74)

    runs = demo_runs.demo_runs(tmp_path)

    assert [(run.commit, run.machine, run.steps, run.wall) for run in runs] == [
        ("e0e0e0e", "AVX512-BF16", 980, ""), ("68639ad", "AVX2 (fp32)", 1499, "8 min 51 s"),
        ("c56ccfe", "Xeon with AMX", 2822, ""), ("04c66b0", "AVX512-BF16", 3013, "8 min 9 s"),
        ("95cce81", "AVX2 (fp32)", 1003, "9 min 55 s")]
    rows = demo_runs.table(runs).splitlines()
    assert rows[-2] == ("| 2026-12-02 | 04c66b0 | AVX512-BF16 | 3,013 | 13,123 | 8 min 9 s | 44.81 ± 1.51 | 61.67 "
                        "| `results/demo-en-fr-cpu-bf16-04c66b0.json` |")
    assert len(rows) == 2 + 5
    assert runs[0].test_bleu == 31.08
    assert demo_runs.summary(runs).splitlines()[0] == ("AVX2 (fp32): 2 runs, test BLEU 30.74-34.72 (median 32.73); "
                                                       "latest 30.74 at 95cce81 (2026-12-02)")
    assert demo_runs.summary(runs[:1]) == "AVX512-BF16: 1 run, test BLEU 31.08; latest 31.08 at e0e0e0e (2026-11-23)"
    assert demo_runs.summary(runs).splitlines()[1] == ("AVX512-BF16: 2 runs, test BLEU 31.08-44.81 (median 37.95); "
                                                       "latest 44.81 at 04c66b0 (2026-12-02)")


def test_the_docs_table_is_the_scripts_output_on_the_records():
    """docs/results.md quotes the table: a record added without regenerating it leaves the docs behind."""
    demo_runs = _script()
    docs = (SCRIPT.parent.parent / "docs" / "results.md").read_text()
    assert demo_runs.table(demo_runs.demo_runs()) in docs
    assert demo_runs.summary(demo_runs.demo_runs()) in docs
