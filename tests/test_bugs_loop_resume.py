"""Training-loop bugs around early stopping, restarts and epochs: each plant does the literal
thing (cheap mechanism tests on the mlp: a few steps at most; validity proves the outcomes)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import quick_cfg

from bugzoo.bugs import get_bug
from bugzoo.harness.runner import execute
from bugzoo.scenarios import list_scenarios
from bugzoo.telemetry import TIMING_COLUMNS
from bugzoo.train import Trainer

GROUP = ("early_stop_best_zero", "resume_without_optimizer_state", "resume_missing_checkpoint",
         "reinit_every_epoch")


def built(scenario: str, *overrides: str, armed: bool = True) -> Trainer:
    cfg = quick_cfg(f"scenario={scenario}", *overrides)
    return Trainer(cfg, get_bug(cfg.bug.id) if cfg.bug else None, armed=armed).build()


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("bug_id", GROUP)
def test_every_model_has_its_scenario_and_a_matched_control(bug_id):
    bug = get_bug(bug_id)
    found = {s.model: s for s in list_scenarios() if s.bug == bug_id}
    assert set(found) == set(bug.models) and bug.since == "1.1"
    assert all(s.control for s in found.values())


def test_early_stopping_that_starts_at_zero_never_sees_an_improvement():
    trainer = built("mlp-early_stop_best_zero")
    trainer.reset_early_stopping()
    assert trainer.best_val_loss == 0.0
    # a loss that keeps falling still counts as no improvement: patience 2 stops at the second
    assert [trainer.should_stop(v) for v in (1.7, 0.5, 0.3)][:2] == [False, True]
    twin = built("mlp-early_stop_best_zero", armed=False)
    twin.reset_early_stopping()
    assert twin.best_val_loss == math.inf
    assert not any(twin.should_stop(v) for v in (1.7, 0.5, 0.3))


def test_the_buggy_run_stops_after_patience_evaluations_the_control_does_not():
    short = ("harness.steps=30", "harness.eval_interval=10")
    buggy = execute(quick_cfg("scenario=mlp-early_stop_best_zero", *short)).summary
    clean = execute(quick_cfg("scenario=mlp-clean-early_stop", *short)).summary
    # evaluations before training and at step 9: two without "improvement", stop at step 9
    assert buggy["steps_completed"] == 10 and buggy["outcome"] == "completed"
    assert clean["steps_completed"] == 30


def restarted(scenario: str, armed: bool = True) -> tuple[Trainer, dict]:
    """A run trained 3 steps, then preempted and resumed at step 3; with its weights before."""
    trainer = built(scenario, "harness.restart_at=3", "harness.eval_interval=100", armed=armed)
    trainer.fit(steps=3)
    before = weights(trainer.model)
    trainer.step = 3  # the loop restarts at the top of step restart_at
    trainer.restart()
    return trainer, before


def test_a_resume_without_optimizer_state_restores_only_the_weights():
    trainer, before = restarted("mlp-resume_without_optimizer_state")
    assert same(weights(trainer.model), before)
    assert trainer.optimizer.state_dict()["state"] == {}  # AdamW's moments are gone
    assert trainer.scheduler.last_epoch == 0  # the warm-up starts again
    assert trainer.lr() == pytest.approx(trainer.cfg.optim.lr / trainer.cfg.optim.warmup_steps)
    twin, before = restarted("mlp-resume_without_optimizer_state", armed=False)
    assert same(weights(twin.model), before)
    assert twin.scheduler.last_epoch == 3 and len(twin.optimizer.state_dict()["state"]) > 0


def test_a_missing_checkpoint_leaves_the_freshly_built_parts():
    trainer, before = restarted("mlp-resume_missing_checkpoint")
    assert same(weights(trainer.model), trainer.built_state["model"])  # step-0 weights
    assert not same(weights(trainer.model), before)
    assert trainer.optimizer.state_dict()["state"] == {} and trainer.scheduler.last_epoch == 0
    twin, before = restarted("mlp-resume_missing_checkpoint", armed=False)
    assert same(weights(twin.model), before)


def test_before_the_restart_both_resume_bugs_are_the_clean_run():
    """The restart is the onset: a run that ends before it is bitwise its control."""
    short = ("harness.steps=8", "harness.eval_interval=4")
    clean = execute(quick_cfg("scenario=mlp-clean-restart150", *short)).summary["trace_digest"]
    for bug_id in ("resume_without_optimizer_state", "resume_missing_checkpoint"):
        run = execute(quick_cfg(f"scenario=mlp-{bug_id}", *short))
        assert run.summary["trace_digest"] == clean, bug_id


def epoch_starts(trainer: Trainer, steps: int) -> list[tuple[int, int]]:
    """(epoch, step) each time the loop announces an epoch, over ``steps`` steps."""
    seen, announce = [], trainer.start_epoch

    def start_epoch(epoch: int) -> None:
        seen.append((epoch, trainer.step))
        announce(epoch)

    trainer.start_epoch = start_epoch
    trainer.fit(steps=steps)
    return seen


def test_the_loop_announces_each_epoch_before_its_first_batch():
    # 4000 rows in batches of 1000: an epoch every 4 steps
    trainer = built("mlp-clean", "harness.batch_size=1000")
    assert epoch_starts(trainer, 9) == [(0, 0), (1, 4), (2, 8)]


def test_reinit_every_epoch_draws_fresh_weights_at_each_epoch_from_its_onset():
    trainer = built("mlp-reinit_every_epoch", "harness.batch_size=1000", "bug.onset=4")
    trainer.fit(steps=4)
    trained = weights(trainer.model)
    state = {k: v.clone() for k, v in trainer.optimizer.state_dict()["state"][0].items()}
    trainer.step = 4
    trainer.start_epoch(1)
    fresh = weights(trainer.model)
    assert all(not torch.equal(trained[k], fresh[k]) for k in trained)
    head = trainer.model.head
    assert head.bias.abs().max() == 0 and head.weight.abs().max() < 0.1 * 0.25  # a new init
    # the optimizer carries on with its moments
    assert torch.equal(trainer.optimizer.state_dict()["state"][0]["exp_avg"], state["exp_avg"])
    # before the onset the epoch start leaves the weights alone
    early = built("mlp-reinit_every_epoch", "harness.batch_size=1000", "bug.onset=4")
    start = weights(early.model)
    early.start_epoch(0)
    assert same(weights(early.model), start)


def test_reinit_every_epoch_sends_the_loss_back_to_log_c_at_the_epoch_boundary():
    short = ("harness.batch_size=1000", "harness.steps=6")  # an epoch every 4 steps
    buggy = execute(quick_cfg("scenario=mlp-reinit_every_epoch", *short, "bug.onset=4")).trace
    clean = execute(quick_cfg("scenario=mlp-clean", *short)).trace
    stable = [c for c in buggy.columns if c not in TIMING_COLUMNS]
    assert buggy[stable].iloc[:4].equals(clean[stable].iloc[:4])
    assert abs(buggy.loss.iloc[4] - math.log(6)) < 0.01  # a fresh model's loss
    assert clean.loss.iloc[4] < buggy.loss.iloc[4] - 0.03
