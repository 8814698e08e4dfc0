"""Why training stopped, said in the config's terms, and the limits that can be raised to train on (patience too)."""

import pytest

from nmt.config import load_config
from nmt.errors import NMTError
from nmt.train import train
from tests_helpers import TOY_RUN, write_config


def _train(tmp_path, data_dir, **train_settings):
    said = []
    # lr 1e-9: dev BLEU cannot move, so every validation after the first is one without gain.
    cfg = load_config(write_config(tmp_path, base=TOY_RUN, train={"lr": 1e-9, "eval_every": 2, "save_every": 2,
                                                                  "max_steps": 40, **train_settings}))
    progress = train(cfg, tmp_path / "run", data_dir, log=said.append)
    return progress, said


def test_patience_stops_says_why_and_a_raised_patience_trains_on(tmp_path, toy_data_dir):
    progress, said = _train(tmp_path, toy_data_dir, patience=2)
    assert progress.step == 6 and progress.finished
    assert "stopped early at step 6: no dev-BLEU gain in the last 2 validations (train.patience 2)" in said
    progress, said = _train(tmp_path, toy_data_dir, patience=2)
    assert progress.step == 6
    assert said[-2:] == [f"{tmp_path / 'run'} already finished at step 6: no dev-BLEU gain in the last 2 "
                         "validations (train.patience 2); raise it to train on", "done at step 6, best dev BLEU 0.00"]
    # Before, a run stopped by patience was finished for good, whatever the config said on the next run.
    progress, said = _train(tmp_path, toy_data_dir, patience=3)
    assert progress.step == 8 and "stopped early at step 8: no dev-BLEU gain in the last 3 validations " \
        "(train.patience 3)" in said
    # Patience running out on the step cap's own update is no early stop: before, that said "stopped early at step
    # 6: train.max_steps 6 reached".
    (tmp_path / "capped").mkdir()
    progress, said = _train(tmp_path / "capped", toy_data_dir, patience=2, max_steps=6)
    assert progress.step == 6 and progress.finished and not any("stopped early" in line for line in said)
    assert said[-1] == "done at step 6, best dev BLEU 0.00"


def test_the_step_and_epoch_limits_are_named_and_kept_in_the_runs_log(tmp_path, toy_data_dir):
    progress, said = _train(tmp_path, toy_data_dir, max_steps=4)
    progress, said = _train(tmp_path, toy_data_dir, max_steps=4)
    assert f"{tmp_path / 'run'} already finished at step 4: train.max_steps 4 reached; raise it to train on" in said
    (tmp_path / "epochs").mkdir()
    progress, said = _train(tmp_path / "epochs", toy_data_dir, max_epochs=1, max_steps=1000, eval_every=1000)
    assert 0 < progress.step < 1000 and progress.epoch == 1
    assert said[-2] == f"train.max_epochs 1 reached at step {progress.step}"
    # The last update is validated, as when max_steps ends training: before, a run ended by its epochs had no dev
    # BLEU for the weights it ended with (none at all when eval_every was not reached) and no best.pt.
    assert said[-1] == f"done at step {progress.step}, best dev BLEU 0.00"
    run = tmp_path / "epochs" / "run"
    assert (run / "checkpoints" / "best.pt").exists()
    # What training said is in RUN/train.log, one timestamped line each.
    logged = (run / "train.log").read_text().splitlines()
    assert [line[20:] for line in logged[-2:]] == said[-2:] and logged[0][:4].isdigit()
    (tmp_path / "bad").mkdir()
    with pytest.raises(NMTError, match="train.pack_length 2 is shorter"):  # refused before training: no trace left
        _train(tmp_path / "bad", toy_data_dir, pack_length=2)
    assert not (tmp_path / "bad" / "run").exists()
