"""One JSON record in results/ per measurement: command, commit, device, date and the figures (README cites them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from nmt.device import cpu_has_bf16

ROOT = Path(__file__).resolve().parent.parent


def current_commit(root: Path = ROOT) -> str:
    """The checkout's commit; on a lent GPU machine, which gets a copy of the tree without its git history, the one
    that scripts/device_pack.sh wrote into .device/COMMIT (or $NMT_COMMIT)."""
    found = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True).stdout.strip()
    if found:
        return found
    if os.environ.get("NMT_COMMIT"):
        return os.environ["NMT_COMMIT"]
    packed = root / ".device" / "COMMIT"
    return packed.read_text().strip() if packed.is_file() else "unknown"


def device_description() -> str:
    """The accelerator a measurement could have used: the GPU by name when CUDA is there, else the CPU."""
    cpu = f"CPU, {os.cpu_count()} cores, native bf16: {cpu_has_bf16()}"
    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda}); host {cpu}"
    return cpu


# Environment variables that change what is measured, not only where caches go: the compiler's settings read from
# the environment (e.g. TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1, which tunes inductor's kernels' block sizes).
MEASURED_ENVIRONMENT = ("TORCHINDUCTOR_", "TRITON_")


def measured_environment() -> dict[str, str]:
    return {name: value for name, value in sorted(os.environ.items())
            if name.startswith(MEASURED_ENVIRONMENT) and not name.endswith("_CACHE_DIR")}


def write_record(path: Path, **figures) -> None:
    """The record, its command as run: with the environment variables that changed the measurement before it, and
    those also as `environment` (scripts/gpu_report.py counts them among the settings a config does not ship)."""
    environment = measured_environment()
    command = [*(f"{name}={value}" for name, value in environment.items()), "python", *sys.argv]
    record = {"command": " ".join(command), "commit": current_commit(), "device": device_description(),
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              **({"environment": environment} if environment else {}), **figures}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
