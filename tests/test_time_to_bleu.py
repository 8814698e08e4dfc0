"""scripts/time_to_bleu.py: the wall clock to a dev BLEU target is the training's own, whatever the child prints."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from time_to_bleu import dev_bleu_curve, train_until  # noqa: E402

# A stand-in for `nmt train`: a progress bar's worth of stderr (far more than a pipe's 64 KiB), then the validation
# that reaches the target, then training that goes on until stopped.
CHATTY_TRAINING = """
import json, sys, time
for _ in range(20_000):
    sys.stderr.write("train:  42%|####      | 1234/3000 [00:30<00:40, 41.2it/s, loss=2.013]\\r")
with open(sys.argv[1], "a") as metrics:
    metrics.write(json.dumps({"type": "valid", "step": 3000, "time_s": 75.0, "dev_bleu": 50.9}) + "\\n")
time.sleep(60)
"""


def test_a_child_that_prints_more_than_a_pipe_holds_is_timed_to_its_target(tmp_path):
    metrics, stderr_log = tmp_path / "metrics.jsonl", tmp_path / "seed1.stderr.log"
    command = [sys.executable, "-c", CHATTY_TRAINING, str(metrics)]
    reached, reached_s, returncode = train_until(command, {}, metrics, stderr_log, dev_bleu=50.0, wall_limit_s=30.0,
                                                 stop_at_target=True, poll_s=0.1)
    assert reached == {"type": "valid", "step": 3000, "time_s": 75.0, "dev_bleu": 50.9}
    assert reached_s < 30.0 and returncode != 0  # stopped by the SIGTERM at the target, not at the wall limit
    assert stderr_log.stat().st_size > 1_000_000  # every byte the child wrote is kept for a failure's message


def test_a_run_that_never_reaches_its_target_is_stopped_at_the_wall_limit(tmp_path):
    metrics, stderr_log = tmp_path / "metrics.jsonl", tmp_path / "seed1.stderr.log"
    below = json.dumps({"type": "valid", "step": 250, "time_s": 9.0, "dev_bleu": 12.0})
    command = [sys.executable, "-c", f"open({str(metrics)!r}, 'w').write({below!r} + '\\n'); "
               "import time; time.sleep(60)"]
    reached, reached_s, returncode = train_until(command, {}, metrics, stderr_log, dev_bleu=50.0, wall_limit_s=2.0,
                                                 stop_at_target=True, poll_s=0.1)
    assert reached is None and reached_s is None and returncode != 0



def test_the_dev_bleu_curve_is_every_validation_in_order():
    validations = [{"type": "valid", "step": 2750, "time_s": 60.1, "dev_bleu": 49.6, "seconds": 4.0},
                   {"type": "valid", "step": 3000, "time_s": 65.4, "dev_bleu": 50.27, "seconds": 4.2}]
    assert dev_bleu_curve(validations) == [[2750, 60.1, 49.6], [3000, 65.4, 50.27]]
