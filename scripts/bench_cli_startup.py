"""Seconds and peak memory of one CLI command from process start to exit (what a user waits for at every `nmt
translate`), for one or more checkouts of nmt, alternating (so drift in the machine's speed hits all alike).

    python scripts/bench_cli_startup.py --run runs/transformer --tree /tmp/old-nmt --tree . [--rounds 5] \
        [--out results/x.json] [-- translate --run RUN "i'm home ."]

Each tree's package is put first on the path of `python -S` (no site hooks, so no editable install's finder), with
this environment's site-packages after it: one virtual environment runs every checkout. The command after
`--` (default: translate the run's checkpoint one sentence) has RUN replaced by --run; it runs in /, so paths in it
must be absolute.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from results_record import write_record

NEUTRAL = "/"  # the children's working directory: not a checkout, whose nmt/ `python -m` would import first


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one child process, from os.wait4's own accounting of that child. Its
    stderr goes to a file (a pipe nobody reads while waiting could fill and stall it)."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=NEUTRAL)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed ({child.returncode}): {stderr.read().decode()[-400:]}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1:] if "--" in argv else None
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--tree", type=Path, action="append", required=True, help="a checkout of nmt (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv[:argv.index("--")] if command else argv)
    command = [str(args.run.resolve()) if part == "RUN" else part
               for part in (command or ["translate", "--run", "RUN", "i'm home ."])]
    trees = [tree.resolve() for tree in args.tree]
    environments = {tree: {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), sysconfig.get_paths()["purelib"]])}
                    for tree in trees}
    for tree, env in environments.items():  # each tree's own package, not the installed one
        found = subprocess.run([sys.executable, "-S", "-c", "import nmt; print(nmt.__file__)"], env=env,
                               capture_output=True, text=True, cwd=NEUTRAL).stdout.strip()
        if not found.startswith(str(tree)):
            raise SystemExit(f"{tree}: imports {found or 'no nmt'}, not its own nmt")
    samples = {str(tree): [] for tree in trees}
    for _ in range(args.rounds):
        for tree, env in environments.items():
            samples[str(tree)].append(timed([sys.executable, "-S", "-m", "nmt", *command], env))
    figures = {tree: {"seconds_median": round(statistics.median(s for s, _ in runs), 2),
                      "seconds": [round(s, 2) for s, _ in runs],
                      "peak_rss_mib_median": round(statistics.median(m for _, m in runs))}
               for tree, runs in samples.items()}
    print(json.dumps(figures, indent=2))
    if args.out:
        write_record(args.out, cli=["nmt", *command], rounds=args.rounds, figures=figures)


if __name__ == "__main__":
    main()
