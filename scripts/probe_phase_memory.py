"""Peak resident memory of each phase of a CPU training run's end: updates, validation, checkpoint, in one process.

    python scripts/probe_phase_memory.py --steps 300 [--set train.max_tokens=4096 ...]

Drives `Trainer` on `configs/cpu-base.yaml` (4,096 tokens, bf16 unless --set says otherwise) as its loop does —
updates with the heap trimmer, then a forced trim, validation (`evaluate_and_maybe_stop`, which also snapshots the
best checkpoint), a forced trim, `save_checkpoint` and the writer's wait — and prints, for each phase, the resident
set when it starts and the peak within it. The peak is the kernel's high-water mark (VmHWM), reset before each phase
by writing 5 to /proc/self/clear_refs (Linux), so no sampling interval can miss it. scripts/bench_train_memory.py
gives the whole process's peak; this says which phase makes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nmt.config import load_config  # noqa: E402
from nmt.cpu_memory import resident_bytes  # noqa: E402
from nmt.run_dir import Run  # noqa: E402
from nmt.train import Trainer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from process_memory import peak_rss_bytes, reset_peak_rss  # noqa: E402

GIB = 2**30


class Phases:
    """Start and peak resident set of each named phase, in order."""

    def __init__(self):
        self.records: list[dict] = []

    def run(self, name: str, work):
        start = resident_bytes()
        reset_peak_rss()
        result = work()
        self.records.append({"phase": name, "start_gib": round(start / GIB, 3),
                             "peak_gib": round(peak_rss_bytes() / GIB, 3), "end_gib": round(resident_bytes() / GIB, 3)})
        print(json.dumps(self.records[-1]), flush=True)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path(__file__).resolve().parent.parent / "configs/cpu-base.yaml")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--steps", type=int, default=300, help="updates before validation (in blocks of 50)")
    parser.add_argument("--data-dir", type=Path, default=Path("data"))
    args = parser.parse_args()
    cfg = load_config(args.config, overrides=["train.max_tokens=4096", "train.precision=bf16", *args.overrides])
    phases = Phases()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Run(Path(tmp)), args.data_dir, log=lambda *_: None)
        phases.run("setup", trainer.setup)
        plans = trainer.feed.update_plans(0, 0, args.steps)

        def updates(count: int) -> None:
            for _, plan in zip(range(count), plans):
                trainer.train_step(trainer.feed.host_batches(plan.micro_batches))
                trainer.trim_heap()
                trainer.progress.step += 1

        for done in range(0, args.steps, 50):
            phases.run(f"updates {done + 1}-{min(done + 50, args.steps)}", lambda: updates(50))
        phases.run("trim", lambda: trainer.trim_heap(force=True))
        phases.run("validation", trainer.evaluate_and_maybe_stop)
        phases.run("trim", lambda: trainer.trim_heap(force=True))
        phases.run("checkpoint snapshot", trainer.save_checkpoint)
        phases.run("checkpoint write (wait)", trainer.writer.wait)


if __name__ == "__main__":
    main()
