"""One JSON record in results/ per measurement: command, commit, device, date and the figures (README cites them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from nmt.device import cpu_has_bf16


def write_record(path: Path, **figures) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = {"command": " ".join(["python", *sys.argv]), "commit": commit,
              "device": f"CPU, {os.cpu_count()} cores, native bf16: {cpu_has_bf16()}",
              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), **figures}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
