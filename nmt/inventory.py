"""What runs there are: one row per run directory under a root, saying what it trains, how far it got and how it
scored (`nmt runs`). Reads config.yaml, metrics.jsonl and eval/*.report.json only: no checkpoint, no torch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from nmt.data.sources import languages
from nmt.errors import NMTError
from nmt.lock import is_locked
from nmt.run_dir import Run


@dataclass(frozen=True)
class RunSummary:
    directory: Path
    model: str  # e.g. "transformer 2x256" (layers x width), or "unreadable config.yaml"
    pair: str  # "en→fr"
    steps: int | None  # the last step metrics.jsonl recorded
    best_dev_bleu: float | None
    evaluations: list[tuple[str, float]]  # (report name, BLEU) of eval/*.report.json, best first
    training: bool  # a training holds the run's lock now
    problem: str | None = None  # why config.yaml could not be read, said under the table


def find_runs(root: Path) -> list[Run]:
    """Every run directory (one with a config.yaml) right under `root`, by name, or `root` itself when it is one
    (`nmt runs --root runs/demo`); an error when there is none."""
    runs = [Run(path.parent) for path in sorted(Path(root).glob("*/config.yaml"))]
    if not runs and (Path(root) / "config.yaml").is_file():
        runs = [Run(Path(root))]
    if not runs:
        where = "" if Path(root).is_dir() else " (not a directory)"
        raise NMTError(f"no runs under {root}/{where}: train one with `nmt train --config demo`, or "
                       "name the folder the runs are in: nmt runs DIR")
    return runs


def summarize(run: Run) -> RunSummary:
    problem = None
    try:
        cfg = run.read_config()
        m = cfg.model
        width = m.embed_dim if m.arch == "transformer" else m.hidden_size
        model, pair = f"{m.arch} {m.num_layers}x{width}", "→".join(languages(cfg.data))
    except (NMTError, OSError) as err:  # a damaged or private run still gets its row, the reason under the table
        model, pair, problem = "unreadable config.yaml", "?", _reason(err)
    steps, best = None, None
    try:
        records = run.metrics.records()
        steps = max((r["step"] for r in records), default=None)
        best = max((r["dev_bleu"] for r in records if r["type"] == "valid"
                    and type(r.get("dev_bleu")) in (int, float)), default=None)
    except NMTError:  # no metrics yet
        pass
    except OSError as err:  # a colleague's run on a shared disk that this user may not read: it stopped the listing
        problem = problem or _reason(err)
    return RunSummary(run.directory, model, pair, steps, best, _evaluations(run.eval_dir), is_locked(run.directory),
                      problem)


def _reason(err: Exception) -> str:
    if isinstance(err, OSError):
        return f"cannot read {err.filename}: {err.strerror or err}" if err.filename else str(err.strerror or err)
    return str(err)


def _evaluations(eval_dir: Path) -> list[tuple[str, float]]:
    scored = []
    for path in eval_dir.glob("*.report.json"):
        try:
            scored.append((path.name.removesuffix(".report.json"), float(json.loads(path.read_text("utf-8"))["bleu"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a report being written, or of another tool: not this table's business
    return sorted(scored, key=lambda item: -item[1])


def format_runs(summaries: list[RunSummary], evaluations_shown: int = 2) -> str:
    """A table, a run per row; each run's best evaluations (e.g. `test.beam5 40.81`), the rest counted; under it,
    why a run's config could not be read (the whole message: a table cell would cut it)."""
    header = ("run", "model", "pair", "steps", "dev BLEU", "evaluations (BLEU)")
    rows = []
    for s in summaries:
        shown = ", ".join(f"{name} {bleu:.2f}" for name, bleu in s.evaluations[:evaluations_shown])
        more = len(s.evaluations) - evaluations_shown
        rows.append((str(s.directory) + (" (training)" if s.training else ""), s.model, s.pair,
                     "-" if s.steps is None else f"{s.steps:,}",
                     "-" if s.best_dev_bleu is None else f"{s.best_dev_bleu:.2f}",
                     (shown + (f" (+{more} more)" if more > 0 else "")) or "-"))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines + [f"note: {s.problem}" for s in summaries if s.problem])
