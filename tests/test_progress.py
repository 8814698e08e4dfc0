"""Training's progress: a bar on a terminal, and a line per log window where stderr is a file (nohup, a scheduler's
output file), where the bar's carriage-return frames made one endless line, ten frames a second."""

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios

import pytest

from nmt.training_report import progress_line
from tests_helpers import TOY_RUN, default_stop_signals, nmt, write_config


def _train(tmp_path, toy_data_dir, stderr) -> subprocess.Popen:
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 12, "log_every": 4, "eval_every": 100})
    return subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config), "--run-dir",
                             str(tmp_path / "run"), "--data-dir", str(toy_data_dir)], stderr=stderr,
                            stdout=subprocess.DEVNULL)


def test_training_into_a_file_says_a_line_per_window(tmp_path, toy_data_dir):
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 12, "log_every": 4, "eval_every": 100})
    done = nmt("train", "--config", config, "--run-dir", tmp_path / "run", data_dir=toy_data_dir)  # stderr: a pipe
    assert done.returncode == 0, done.stderr
    said = done.stderr
    assert "\r" not in said, said
    windows = [line for line in said.splitlines() if line.startswith("train: step ")]
    assert [line.split(",")[0] for line in windows] == [f"train: step {n}/12" for n in (4, 8, 12)], said
    assert all(" tok/s, MFU " in line and ", lr " in line for line in windows), said
    assert "train.max_tokens" not in said, said  # every toy pair fits the budget of 400


def test_a_token_budget_written_as_a_sentence_count_is_named_in_a_warning(tmp_path, toy_data_dir):
    """`max_tokens: 4`, as a user of batch sizes in sentences writes it: every pair trained alone, without a word."""
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 2, "max_tokens": 4, "eval_every": 100})
    done = nmt("train", "--config", config, "--run-dir", tmp_path / "run", data_dir=toy_data_dir)
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stderr.splitlines() if "train.max_tokens 4 " in line)
    assert warning.startswith("warning: ") and "training pairs (" in warning, warning
    assert "counts tokens, not sentences; raise it to at least " in warning, warning
    assert warning.removeprefix("warning: ") in (tmp_path / "run" / "train.log").read_text()


@pytest.mark.parametrize("columns", [100, 0], ids=["sized", "no-size"])
def test_training_on_a_terminal_draws_the_bar(tmp_path, toy_data_dir, columns):
    """On a terminal that reports no size (a serial console, `docker exec -t` before it is resized) tqdm drew a bar
    of no width: lines there, as in a file."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        training = _train(tmp_path, toy_data_dir, follower)
        os.close(follower)
        said = b""
        while True:  # read as it comes: a terminal holds a few kB, then the writer waits
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the training closed the terminal (it ended) and everything was read
                break
            if not chunk:
                break
            said += chunk
        assert training.wait(timeout=300) == 0
    finally:
        os.close(leader)
    text = said.decode().replace("\r\n", "\n")  # the terminal's own line ends
    if columns:
        assert "\r" in text and "12/12" in text and "train: step " not in text, text
    else:
        assert "\r" not in text and "train: step 12/12, loss " in text, text


def test_a_progress_line():
    figures = {"loss": 3.14159, "tokens_per_s": 12345.6, "mfu": 0.0987}
    assert progress_line(1200, 5000, figures, 1.5e-3, 83.2) == \
        "train: step 1,200/5,000, loss 3.142, lr 1.50e-03, 12,346 tok/s, MFU 9.9%, 01:23"
    assert progress_line(0, 10, {**figures, "loss": None}, 0.0, 0).startswith("train: step 0/10, loss -,")


def test_training_whose_output_reader_leaves_stops_with_a_checkpoint(tmp_path, toy_data_dir):
    """`nmt train ... 2>&1 | head`, or a `tee` or an ssh session that ended: the next line was a BrokenPipeError that
    ended training where it stood, without a checkpoint, and exit 1. Now it stops as SIGTERM stops it, exit 141."""
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 100000, "log_every": 2, "eval_every": 100000,
                                                         "save_every": 100000})
    training = subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config), "--run-dir",
                                 str(tmp_path / "run"), "--data-dir", str(toy_data_dir)], stderr=subprocess.PIPE,
                                stdout=subprocess.DEVNULL)
    for line in training.stderr:  # the reader takes lines until training has begun, then leaves
        if line.startswith(b"train: step "):
            break
    training.stderr.close()
    assert training.wait(timeout=300) == 141
    said = (tmp_path / "run" / "train.log").read_text().splitlines()
    assert said[-2].endswith("run the same command to resume") and " interrupted: checkpoint saved at step " in said[-2]
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


def test_a_hangup_stops_training_with_a_checkpoint(tmp_path, toy_data_dir):
    """SIGHUP (the terminal of an ssh session that dropped) killed training where it stood, losing every update
    since the last save; it stops as Ctrl-C and SIGTERM do now."""
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 100000, "log_every": 2, "eval_every": 100000,
                                                         "save_every": 100000})
    training = subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config), "--run-dir",
                                 str(tmp_path / "run"), "--data-dir", str(toy_data_dir)], stderr=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, text=True, preexec_fn=default_stop_signals)
    for line in training.stderr:
        if line.startswith("train: step "):
            training.send_signal(signal.SIGHUP)
            break
    rest = training.stderr.read()
    assert training.wait(timeout=300) == 0, rest
    assert "interrupted: checkpoint saved at step " in rest and (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


def test_under_nohup_a_hangup_leaves_training_running(tmp_path, toy_data_dir):
    """`nohup nmt train ... &`, then the terminal closed: nohup starts it with SIGHUP ignored, yet training put its
    stop handler there, and the hangup stopped it (a checkpoint, exit 0) where it was meant to go on. An ignored
    signal stays ignored now; SIGTERM still stops it with a checkpoint."""
    def as_nohup_starts_it():
        default_stop_signals()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 100000, "log_every": 2, "eval_every": 100000,
                                                         "save_every": 100000})
    training = subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config), "--run-dir",
                                 str(tmp_path / "run"), "--data-dir", str(toy_data_dir)], stderr=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, text=True, preexec_fn=as_nohup_starts_it)
    steps_after_hangup = None
    for line in training.stderr:
        if line.startswith("train: step ") and steps_after_hangup is None:
            training.send_signal(signal.SIGHUP)
            steps_after_hangup = 0
        elif line.startswith("train: step "):
            steps_after_hangup += 1
            if steps_after_hangup == 3:  # 6 more updates, each logged after the hangup
                training.send_signal(signal.SIGTERM)
                break
    rest = training.stderr.read()
    assert training.wait(timeout=300) == 0, rest
    assert steps_after_hangup == 3 and "interrupted: checkpoint saved at step " in rest, rest


def test_training_goes_on_when_its_terminal_is_gone(tmp_path, toy_data_dir):
    """`nmt train ... & disown`, then the window closed: no hangup reaches it, but each write to the terminal is
    EIO, and the first ended training at once. It goes on to its end now, its record in RUN/train.log."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    config = write_config(tmp_path, base=TOY_RUN, train={"max_steps": 60, "log_every": 2, "eval_every": 60})
    training = subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(config), "--run-dir",
                                 str(tmp_path / "run"), "--data-dir", str(toy_data_dir)], stderr=follower,
                                stdout=subprocess.DEVNULL)
    os.close(follower)
    said = b""
    while b"training from step" not in said:
        said += os.read(leader, 65536)
    os.close(leader)  # the terminal goes: every later write to it fails with EIO
    assert training.wait(timeout=300) == 0
    assert " done at step 60, best dev BLEU " in (tmp_path / "run" / "train.log").read_text().splitlines()[-1]
