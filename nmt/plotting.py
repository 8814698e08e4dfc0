"""Pictures: attention heatmaps and learning curves (matplotlib, headless)."""

from __future__ import annotations

import os
from pathlib import Path

# Headless (no display on servers and CI), named before the import too: matplotlib's import validates MPLBACKEND, so a
# user's MPLBACKEND=abc stopped `nmt plot` at an internal ValueError, although Agg replaced it anyway. `use` still
# holds where matplotlib was imported before (a notebook's own backend).
os.environ["MPLBACKEND"] = "Agg"
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from nmt.atomic import atomic_file  # noqa: E402
from nmt.errors import NMTError  # noqa: E402
from nmt.run_dir import Run  # noqa: E402


def _save(fig, path: Path) -> None:
    """Through a fresh temp file beside `path` (never through a planted link), then rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, fsync=False) as handle:
            fig.savefig(handle, dpi=100, bbox_inches="tight", format=path.suffix.lstrip(".").lower() or "png")
    except OSError as err:
        raise NMTError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        plt.close(fig)


def plot_attention(weights, source_pieces: list[str], target_pieces: list[str], path: Path) -> None:
    """weights (target pieces, source pieces): one row per generated piece, labelled axes."""
    rows, cols = len(target_pieces), len(source_pieces)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.32 * cols + 2), max(3.0, 0.32 * rows + 1.5)))
    ax.imshow(weights[:rows, :cols], cmap="viridis", aspect="auto", vmin=0.0)
    ax.set_xticks(range(cols), source_pieces, rotation=90, fontsize=8)
    ax.set_yticks(range(rows), target_pieces, fontsize=8)
    ax.set_xlabel("source pieces")
    ax.set_ylabel("generated pieces")
    _save(fig, path)


def plot_learning_curves(run: Run, path: Path) -> None:
    """Train and dev loss, and dev BLEU, against update steps."""
    train, valid = run.metrics.split()
    train = [r for r in train if isinstance(r.get("loss"), (int, float))]
    valid = [r for r in valid
             if isinstance(r.get("dev_loss"), (int, float)) and isinstance(r.get("dev_bleu"), (int, float))]
    if not train and not valid:
        raise NMTError(f"no metrics records in {run.metrics.path}")
    fig, (loss_ax, bleu_ax) = plt.subplots(1, 2, figsize=(10, 4))
    loss_ax.plot([r["step"] for r in train], [r["loss"] for r in train], label="train (label-smoothed)")
    loss_ax.plot([r["step"] for r in valid], [r["dev_loss"] for r in valid], marker="o", label="dev NLL")
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("loss per target token")
    loss_ax.legend()
    bleu_ax.plot([r["step"] for r in valid], [r["dev_bleu"] for r in valid], marker="o", color="tab:green")
    bleu_ax.set_xlabel("step")
    bleu_ax.set_ylabel("dev BLEU (greedy)")
    # A name whose bytes are not UTF-8 (a Latin-1 "caf\xe9") shown with U+FFFD: matplotlib refuses its surrogates.
    fig.suptitle(os.fsencode(run.directory.name).decode("utf-8", "replace"))
    _save(fig, path)
