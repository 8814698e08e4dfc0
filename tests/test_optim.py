import math

import pytest
import torch

from nmt.config import TrainConfig, load_config
from nmt.errors import ConfigError
from nmt.optim import (TrainingClock, cosine_decay, inverse_sqrt, linear_decay, make_optimizer, make_scheduler,
                       resume_schedule, scheduler_steps_per_update)


def test_inverse_sqrt_warms_up_linearly_then_decays():
    factor = inverse_sqrt(4)
    assert [factor(s) for s in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert factor(15) == pytest.approx(0.5)  # sqrt(4 / 16)


def test_no_weight_decay_on_vectors_and_same_eps_on_every_device():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    optimizer = make_optimizer(model, TrainConfig(weight_decay=0.1))
    decays = {p.dim(): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    assert decays == {2: 0.1, 1: 0.0}
    assert all(g["eps"] == 1e-9 for g in optimizer.param_groups)


def test_plateau_steps_per_validation_others_per_update():
    model = torch.nn.Linear(2, 2)
    optimizer = make_optimizer(model, TrainConfig())
    assert scheduler_steps_per_update(make_scheduler(optimizer, TrainConfig(schedule="inverse_sqrt")))
    assert not scheduler_steps_per_update(make_scheduler(optimizer, TrainConfig(schedule="plateau")))


def test_linear_decay_warms_up_then_falls_to_zero_after_the_last_update():
    factor = linear_decay(warmup_steps=4, max_steps=10)
    assert [round(factor(s), 3) for s in range(10)] == [0.25, 0.5, 0.75, 1.0, 1.0, 0.833, 0.667, 0.5, 0.333, 0.167]


def test_linear_decay_under_a_time_budget_takes_the_lower_of_the_steps_and_the_seconds_left():
    clock = TrainingClock()
    factor = linear_decay(warmup_steps=4, max_steps=10, time_budget_s=100.0, clock=clock)
    clock.elapsed_s = 50.0
    assert factor(1) == 0.5  # the warm-up ramps by steps, whatever the clock
    clock.elapsed_s = 25.0
    assert factor(5) == pytest.approx(0.75)  # steps: 0.833 left; seconds: 0.75
    clock.elapsed_s = 10.0
    assert factor(7) == pytest.approx(0.5)  # steps: 0.5 left; seconds: 0.9
    clock.elapsed_s = 120.0
    assert factor(5) == 0.0  # the budget is spent
    assert linear_decay(4, 10, 0.0, clock)(5) == pytest.approx(5 / 6)  # no budget: the steps alone


def test_cosine_decay_warms_up_then_falls_as_half_a_cosine_by_steps_or_seconds_left():
    factor = cosine_decay(warmup_steps=4, max_steps=10)
    assert [round(factor(s), 3) for s in range(10)] == [0.25, 0.5, 0.75, 1.0, 1.0, 0.933, 0.75, 0.5, 0.25, 0.067]
    clock = TrainingClock(elapsed_s=75.0)
    budgeted = cosine_decay(warmup_steps=4, max_steps=10, time_budget_s=100.0, clock=clock)
    assert budgeted(5) == pytest.approx(0.5 * (1 - math.cos(math.pi * 0.25)))  # steps: 0.833 left; seconds: 0.25


@pytest.mark.parametrize("schedule,elapsed_s,lr", [("linear", 30.0, 2.5e-4), ("cosine", 20.0, 5e-4)])
def test_time_budgeted_decay_schedulers_read_their_clock(schedule, elapsed_s, lr):
    """A quarter of the 40-s budget left: a quarter of the peak (linear); half left: half of it (cosine too)."""
    model, clock = torch.nn.Linear(2, 2), TrainingClock()
    cfg = TrainConfig(schedule=schedule, lr=1e-3, warmup_steps=0, max_steps=1000, time_budget_s=40.0)
    optimizer = make_optimizer(model, cfg)
    scheduler = make_scheduler(optimizer, cfg, clock)
    clock.elapsed_s = elapsed_s
    optimizer.step()
    scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(lr)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_decay_schedules_need_warmup_below_max_steps(schedule):
    with pytest.raises(ConfigError, match=f"train.schedule {schedule} decays from .* warmup_steps must be smaller"):
        load_config(None, [f"train.schedule={schedule}", "train.warmup_steps=100", "train.max_steps=100"])



def test_found_inf_skips_the_update_on_the_device():
    """Trainer.train_step relies on this: a flagged update changes neither weights, moments nor the step count."""
    model = torch.nn.Linear(3, 2)
    optimizer = make_optimizer(model, TrainConfig(lr=0.1))
    model(torch.ones(1, 3)).sum().backward()
    optimizer.grad_scale, optimizer.found_inf = None, torch.tensor(0.0)
    optimizer.step()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = [optimizer.state[p]["exp_avg"].clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = torch.full_like(p, float("nan"))
    optimizer.found_inf = torch.tensor(1.0)
    optimizer.step()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(m, optimizer.state[p]["exp_avg"]) for m, p in zip(moments, model.parameters()))
    assert all(int(optimizer.state[p]["step"]) == 1 for p in model.parameters())


def _trained_states(cfg: TrainConfig, steps: int = 6):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    optimizer = make_optimizer(model, cfg)
    scheduler = make_scheduler(optimizer, cfg)
    for _ in range(steps):
        model(torch.randn(2, 3)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        if scheduler_steps_per_update(scheduler):
            scheduler.step()
    return model, optimizer.state_dict(), scheduler.state_dict()


@pytest.mark.parametrize("schedule", ["inverse_sqrt", "cosine", "constant", "plateau"])
def test_a_resume_takes_the_configs_lr_weight_decay_and_plateau_settings(schedule):
    """The optimizer's and the schedule's saved states hold the hyperparameters they were made with: a resumed run
    went on at its old train.lr and weight_decay (and plateau factor) in silence, while its config.yaml said the new."""
    saved = TrainConfig(lr=2e-3, weight_decay=0.1, schedule=schedule, warmup_steps=4, max_steps=20)
    model, optimizer_state, scheduler_state = _trained_states(saved)
    same_lr = [g["lr"] for g in optimizer_state["param_groups"]]
    for cfg, said in ((saved, []), (TrainConfig(lr=1e-3, weight_decay=0.3, schedule=schedule, warmup_steps=4,
                                                max_steps=20, plateau_factor=0.25, patience=9),
                                    ["train.lr changed from 0.002 to 0.001: the schedule goes on from where it was, "
                                     "at the new scale",
                                     *(["train.plateau_factor changed from 0.5 to 0.25"] if schedule == "plateau"
                                       else []), "train.weight_decay changed from 0.1 to 0.3"])):
        optimizer = make_optimizer(model, cfg)
        scheduler = make_scheduler(optimizer, cfg)
        optimizer.load_state_dict(optimizer_state)
        changed = resume_schedule(optimizer, scheduler, scheduler_state, saved, cfg, step=6)
        assert [message.split(" (")[0] for message in changed] == said
        scale = cfg.lr / saved.lr
        assert [g["lr"] for g in optimizer.param_groups] == [lr * scale for lr in same_lr]  # bitwise when unchanged
        assert [g["weight_decay"] for g in optimizer.param_groups] == [cfg.weight_decay, 0.0]
        if scheduler_steps_per_update(scheduler):
            assert scheduler.base_lrs == [cfg.lr, cfg.lr] and scheduler.get_last_lr() == [g["lr"] for g in
                                                                                         optimizer.param_groups]
            optimizer.step()  # no gradients: nothing moves, but the schedule steps after it, as in training
            scheduler.step()  # the schedule's next factor, at the config's scale
            assert scheduler.get_last_lr() == pytest.approx([cfg.lr * scheduler.lr_lambdas[0](7)] * 2, rel=1e-12)
        else:
            assert (scheduler.factor, scheduler.patience) == (cfg.plateau_factor, max(1, cfg.patience // 3))


@pytest.mark.parametrize("before,after", [("inverse_sqrt", "cosine"), ("plateau", "linear"), ("cosine", "plateau")])
def test_a_resume_with_another_kind_of_schedule_takes_it_up_where_it_stands(before, after):
    """A plateau's saved state loaded into a step schedule was "does not fit this model: 'lr_lambdas'"; a step
    schedule's into a plateau, a state mixed of two kinds. The new one is made afresh and put at the step."""
    saved = TrainConfig(lr=2e-3, schedule=before, warmup_steps=4, max_steps=20)
    cfg = TrainConfig(lr=1e-3, schedule=after, warmup_steps=4, max_steps=20)
    model, optimizer_state, scheduler_state = _trained_states(saved)
    optimizer = make_optimizer(model, cfg)
    scheduler = make_scheduler(optimizer, cfg)
    optimizer.load_state_dict(optimizer_state)
    changed = resume_schedule(optimizer, scheduler, scheduler_state, saved, cfg, step=6)
    assert changed[0].startswith(f"train.schedule changed from {before} to {after}: the new schedule takes over at "
                                 "step 6 (lr ")
    assert changed[1:] == ["train.lr changed from 0.002 to 0.001: the new schedule's peak"]
    if after == "plateau":
        assert [g["lr"] for g in optimizer.param_groups] == [1e-3, 1e-3]  # a plateau starts at train.lr
    else:
        factor = (cosine_decay if after == "cosine" else linear_decay)(4, 20)
        assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([1e-3 * factor(6)] * 2)
        optimizer.step()
        scheduler.step()
        assert scheduler.get_last_lr() == pytest.approx([1e-3 * factor(7)] * 2)
