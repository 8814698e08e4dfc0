#!/usr/bin/env bash
# The test suite against another torch than the Makefile's 2.13.0, in a throwaway virtual environment: the lent GPU
# machines run torch 2.11 (/work/.library/device/KINDS.md), and pyproject promises torch>=2.4. A CUDA build of torch
# imports and runs on a machine without a GPU, so this checks the version a GPU session will meet before that
# session spends its minutes on it (the CUDA-marked tests skip here, as in CI).
#
#   scripts/test_torch_version.sh 2.11.0            # → results/tests-torch-2.11.0-<machine>.json
#   VENV=/tmp/nmt-torch-2.11.0 PYTEST_ARGS="tests/models" scripts/test_torch_version.sh 2.11.0
#   BASE_PYTHON=python3.12 scripts/test_torch_version.sh 2.11.0   # the GPU image's Python too (dynamo reads bytecode)
#   PIP_CONFIG_FILE=/dev/null scripts/test_torch_version.sh 2.15.0  # past a pip config's cap (e.g. a constraints file)
#
# MACHINE names the record's suffix (cpu-amx, cpu-bf16, cpu-avx2: docs/results.md); RECORD overrides the path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/test_torch_version.sh TORCH_VERSION}
base_python=${BASE_PYTHON:-python3}
py=$("$base_python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
venv=${VENV:-/tmp/nmt-torch-$version-py$py}
machine=${MACHINE:-cpu}
suffix=$([ "$base_python" = python3 ] && echo "" || echo "-py$py")
record=${RECORD:-results/tests-torch-$version$suffix-$machine.json}
log=$venv.log

if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null
then
  "$base_python" -m venv "$venv"
  "$venv/bin/pip" install -q "torch==$version"
fi
"$venv/bin/pip" install -q -e ".[dev]"

# -p no:logging: a compile test's failure would otherwise print megabytes of dynamo's debug log.
start=$(date +%s)
set +e
"$venv/bin/python" -m pytest -q -n auto --maxprocesses=4 --dist worksteal -p no:cacheprovider -p no:logging \
  ${PYTEST_ARGS:-} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
seconds=$(( $(date +%s) - start ))

"$venv/bin/python" - "$record" "$version" "$status" "$seconds" "$log" "${PYTEST_ARGS:-}" "$base_python" \
  "${PIP_CONFIG_FILE:-}" <<'EOF'
import re
import sys
from pathlib import Path

sys.path.insert(0, "scripts")
import torch  # noqa: E402

from results_record import write_record  # noqa: E402

record, version, status, seconds, log, args, base_python, pip_config = sys.argv[1:]
text = Path(log).read_text()
summary = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed)", line)]
write_record(Path(record), torch=torch.__version__, python=sys.version.split()[0], requested=version,
             pytest_args=args, exit_status=int(status),
             seconds=int(seconds), summary=summary[-1] if summary else None,
             failed=re.findall(r"^FAILED (\S+)", text, flags=re.M),
             command=(f"PIP_CONFIG_FILE={pip_config} " if pip_config else "")
             + ("" if base_python == "python3" else f"BASE_PYTHON={base_python} ")
             + f"scripts/test_torch_version.sh {version}")
EOF
exit "$status"
