"""train.ema_decay: an exponential moving average of the weights is what a run validates, saves and translates,
while the optimizer's own weights train on unchanged and resume exactly."""

import pytest
import torch
from torch import nn

from nmt.config import load_config
from nmt.errors import ConfigError
from nmt.run_dir import Run
from nmt.train import train
from nmt.weight_average import WeightAverage, decay_after
from tests_helpers import TOY_RUN, nmt, write_config


class Tied(nn.Module):
    """One weight under two names (a tied embedding), and an integer buffer."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.out = nn.Linear(3, 5, bias=False)
        self.out.weight = self.embed.weight
        self.norm = nn.LayerNorm(3)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))


def test_the_decay_grows_with_the_updates_up_to_its_setting():
    assert decay_after(0, 0.999) == pytest.approx(0.1)
    assert decay_after(90, 0.999) == pytest.approx(91 / 100)
    assert decay_after(10_000, 0.999) == 0.999
    assert decay_after(5, 0.2) == 0.2


def test_the_average_moves_each_tensor_once_toward_the_trained_weights():
    torch.manual_seed(0)
    trained = Tied()
    average = WeightAverage(trained, decay=0.5)
    assert not any(p.requires_grad for p in average.model.parameters()) and not average.model.training
    expected = {k: v.clone() for k, v in trained.state_dict().items()}
    for update in range(3):
        with torch.no_grad():
            for parameter in trained.parameters():
                parameter.add_(torch.randn_like(parameter))
            trained.count += 7
        average.update(update)
        d = decay_after(update, 0.5)
        now = trained.state_dict()
        for key in ("embed.weight", "norm.weight", "norm.bias"):
            expected[key] = d * expected[key] + (1 - d) * now[key]
        expected["count"] = now["count"].clone()
    ours = average.model.state_dict()
    for key in ("embed.weight", "norm.weight", "norm.bias", "count"):
        torch.testing.assert_close(ours[key], expected[key], rtol=0, atol=1e-6)
    # The tie holds in the copy, moved once (as one tensor, not once per name).
    assert average.model.out.weight is average.model.embed.weight
    assert not torch.equal(ours["embed.weight"], trained.state_dict()["embed.weight"])

    average.restart_from_trained()
    assert all(torch.equal(average.model.state_dict()[k], v) for k, v in trained.state_dict().items())


def test_a_decay_of_one_or_more_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="ema_decay"):
        load_config(write_config(tmp_path, base=TOY_RUN, train={"ema_decay": 1.0}))


def _config(tmp_path, name, **train_settings):
    settings = {"precision": "fp32", "eval_every": 100, **train_settings}
    return load_config(write_config(tmp_path, name, base=TOY_RUN, model={"dropout": 0.1}, train=settings))


def _checkpoint(run_dir, name):
    run = Run(run_dir)
    return run.load(run.checkpoint_path(name))


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_checkpoints_hold_the_average_of_the_weights_the_optimizer_trains(tmp_path, toy_data_dir):
    steps, decay = 12, 0.8
    # Without the average, every step's weights are kept (keep_last): the trajectory the average follows.
    plain = _config(tmp_path, "plain", max_steps=steps, save_every=1, keep_last=steps)
    train(plain, tmp_path / "plain", toy_data_dir, log=lambda *_: None)
    averaged = _config(tmp_path, "averaged", max_steps=steps, save_every=6, ema_decay=decay)
    messages = []
    train(averaged, tmp_path / "averaged", toy_data_dir, log=messages.append)
    assert any("train.ema_decay 0.8: validation, best.pt and the checkpoints hold" in m for m in messages)

    last = _checkpoint(tmp_path / "averaged", "last")
    # Averaging changes nothing in training: the optimizer's weights are those of the run without it, bitwise.
    assert _same(last["trained_model"], _checkpoint(tmp_path / "plain", "last")["model"])
    assert last["progress"]["averaged_since"] == 0 and last["progress"]["step"] == steps
    # `model`, what translation loads, is the average of the trained weights after each update.
    run = Run(tmp_path / "plain")
    expected = None
    for n, path in enumerate(run.step_checkpoints()):
        weights = run.load(path)["model"]
        if expected is None:
            expected = {k: v.clone() for k, v in weights.items()}
        d = decay_after(n, decay)
        expected = {k: d * expected[k] + (1 - d) * weights[k] if v.is_floating_point() else weights[k]
                    for k, v in expected.items()}
    assert expected.keys() == last["model"].keys()
    for key in expected:
        torch.testing.assert_close(last["model"][key], expected[key], rtol=0, atol=1e-6)
    assert not _same(last["model"], last["trained_model"])
    # Validated at the last step only: best.pt is the average that validation scored.
    assert _same(_checkpoint(tmp_path / "averaged", "best")["model"], last["model"])

    translated = nmt("translate", "--run", tmp_path / "averaged", "I have two cats.")  # 12 updates: maybe empty
    assert translated.returncode == 0 and translated.stdout.count("\n") == 1, translated.stderr


@pytest.mark.slow
def test_an_averaged_run_resumes_exactly_and_the_average_can_start_or_stop_on_resume(tmp_path, toy_data_dir):
    straight = _config(tmp_path, "straight", max_steps=12, save_every=100, ema_decay=0.9)
    train(straight, tmp_path / "straight", toy_data_dir, log=lambda *_: None)
    half = _config(tmp_path, "half", max_steps=5, save_every=100, ema_decay=0.9)
    train(half, tmp_path / "resumed", toy_data_dir, log=lambda *_: None)
    train(straight, tmp_path / "resumed", toy_data_dir, log=lambda *_: None)
    a, b = _checkpoint(tmp_path / "straight", "last"), _checkpoint(tmp_path / "resumed", "last")
    assert _same(a["model"], b["model"]) and _same(a["trained_model"], b["trained_model"])

    # Set on resume: the average starts from the resumed weights, and training goes on as it would have.
    without = _config(tmp_path, "without", max_steps=5, save_every=100)
    train(without, tmp_path / "started", toy_data_dir, log=lambda *_: None)
    assert "trained_model" not in _checkpoint(tmp_path / "started", "last")
    messages = []
    train(straight, tmp_path / "started", toy_data_dir, log=messages.append)
    assert any("the average of the weights starts from the weights of step 5" in m for m in messages), messages
    started = _checkpoint(tmp_path / "started", "last")
    assert _same(started["trained_model"], a["trained_model"])
    assert started["progress"]["averaged_since"] == 5 and not _same(started["model"], a["model"])

    # Unset on resume: the trained weights go on, and are what is saved from then on.
    longer = _config(tmp_path, "longer", max_steps=14, save_every=100)
    messages = []
    train(longer, tmp_path / "started", toy_data_dir, log=messages.append)
    assert any("train.ema_decay is 0 now" in m for m in messages), messages
    ended = _checkpoint(tmp_path / "started", "last")
    assert "trained_model" not in ended and ended["progress"]["step"] == 14


@pytest.mark.slow
def test_validation_in_the_background_scores_a_copy_of_the_average(tmp_path, toy_data_dir):
    from nmt.train import Trainer

    cfg = _config(tmp_path, "background", max_steps=4, ema_decay=0.9, eval_in_background=True)
    trainer = Trainer(cfg, Run(tmp_path / "run"), toy_data_dir, log=lambda *_: None)
    trainer.setup()
    for plan in trainer.feed.update_plans(0, 0, 3):  # the average and the trained weights part ways
        trainer.train_step(trainer.feed.host_batches(plan.micro_batches))
    trainer.background.copy_weights()
    validated = trainer.translator.model.state_dict()
    assert _same(validated, trainer.average.model.state_dict())
    assert not _same(validated, trainer.model.state_dict())
