"""Every recorded `make demo` run as one markdown table, read from its record in results/ (docs/results.md, "make
demo, run by run", is this script's output): the README quotes the latest runs and the range, this table the rest.

    python scripts/demo_runs.py            # the table, oldest first
    python scripts/demo_runs.py --summary  # per machine: runs, test BLEU range and median, the latest

Records are results/demo-en-fr-cpu-<machine>[-<commit>].json. Their figures' names changed over the sessions (a wall
clock in seconds or in words, steps under three names); each is read where it is.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"
# Records under this name that are experiments on the demo, not `make demo` as a newcomer runs it.
NOT_A_DEMO_RUN = ("emulated", "onednn-cache")
MACHINES = {"avx2": "AVX2 (fp32)", "bf16": "AVX512-BF16", "amx": "Xeon with AMX"}


@dataclass(frozen=True)
class DemoRun:
    record: str
    recorded: str  # the record's whole timestamp: two runs on one day sort by their hour
    commit: str
    machine: str
    steps: int | None
    tokens_per_s: float | None
    wall: str
    test_bleu: float
    test_bleu_ci95: float | None
    test_chrf: float | None

    @property
    def date(self) -> str:
        """The day, as the table shows it."""
        return self.recorded[:10]


def _first(figures: dict, *names):
    return next((figures[name] for name in names if figures.get(name) is not None), None)


def _wall(figures: dict) -> str:
    """The wall clock of make demo as `M min S s`, whichever way the record kept it."""
    seconds = _first(figures, "make_demo_wall_s", "make_demo_wall_clock_s")
    if seconds is not None:
        return f"{int(seconds) // 60} min {int(seconds) % 60} s"
    words = figures.get("make_demo_wall")
    found = re.match(r"\d+ min \d+ s", words or "")
    return found.group(0) if found else ""


def read_run(path: Path) -> DemoRun | None:
    """One record as a run, or None where it is not a make demo run (an experiment, or no test BLEU)."""
    # The first record (2026-11-23, an AVX512-BF16 machine) was named before names carried the machine.
    machine = path.stem.removeprefix("demo-en-fr-cpu").lstrip("-").split("-")[0] or "bf16"
    if any(word in path.stem for word in NOT_A_DEMO_RUN) or machine not in MACHINES:
        return None
    record = json.loads(path.read_text())
    figures = record.get("figures", {})
    # That first record kept beam 5 in both decoding precisions; bf16 is what precision auto decodes in there.
    test_bleu = _first(figures, "test_bleu_beam5", "test_bleu_beam5_bf16_decoding")
    if test_bleu is None:
        return None
    return DemoRun(record=f"results/{path.name}", recorded=record.get("date", ""), commit=record.get("commit", ""),
                   machine=MACHINES[machine], steps=_first(figures, "steps_at_budget", "final_step", "steps"),
                   tokens_per_s=figures.get("median_train_tokens_per_s"), wall=_wall(figures),
                   test_bleu=test_bleu, test_bleu_ci95=figures.get("test_bleu_ci95"),
                   test_chrf=figures.get("test_chrf"))


def demo_runs(results: Path = RESULTS) -> list[DemoRun]:
    runs = (read_run(path) for path in results.glob("demo-en-fr-cpu*.json"))
    return sorted((run for run in runs if run), key=lambda run: (run.recorded, run.record))


def table(runs: list[DemoRun]) -> str:
    lines = ["| date | commit | 2-core CPU | steps in 420 s | tokens/s (median) | make demo | test BLEU, beam 5 | chrF "
             "| record |", "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        bleu = f"{run.test_bleu:.2f}" + (f" ± {run.test_bleu_ci95:.2f}" if run.test_bleu_ci95 is not None else "")
        lines.append(f"| {run.date} | {run.commit} | {run.machine} | {_number(run.steps)} | "
                     f"{_number(run.tokens_per_s)} | {run.wall} | {bleu} | "
                     f"{'' if run.test_chrf is None else f'{run.test_chrf:.2f}'} | `{run.record}` |")
    return "\n".join(lines)


def summary(runs: list[DemoRun]) -> str:
    lines = []
    for machine in MACHINES.values():
        bleus = [run.test_bleu for run in runs if run.machine == machine]
        if bleus:
            latest = [run for run in runs if run.machine == machine][-1]
            spread = (f"{len(bleus)} runs, test BLEU {min(bleus):.2f}-{max(bleus):.2f} (median "
                      f"{statistics.median(bleus):.2f})" if len(bleus) > 1 else f"1 run, test BLEU {bleus[0]:.2f}")
            lines.append(f"{machine}: {spread}; latest {latest.test_bleu:.2f} at {latest.commit} ({latest.date})")
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summary", action="store_true", help="per machine: runs, range, median, the latest")
    args = parser.parse_args()
    runs = demo_runs()
    print(summary(runs) if args.summary else table(runs))


if __name__ == "__main__":
    main()
