"""Sealed runs: a plant cannot leak into a copy of the model or out of the run, a detector cannot
read which bug is planted, and a failing or hanging watcher leaves nothing behind but its alarms."""

from __future__ import annotations

import copy
import io
import subprocess
import sys
import textwrap

import pytest
import torch

from bugzoo.bugs import get_bug, list_bugs
from bugzoo.config import compose_run
from bugzoo.detector import Detector
from bugzoo.harness import store
from bugzoo.harness.pool import RunTask, run_tasks
from bugzoo.harness.runner import execute
from bugzoo.harness.watch import run_view
from bugzoo.judge.conformance import _reachable_strings
from bugzoo.scenarios import get_scenario, list_scenarios
from bugzoo.train import Trainer

ONE_PER_BUG = [min((s for s in list_scenarios() if s.bug == b.id and not s.isolate
                    and not s.needs_cuda), key=lambda s: (bool(s.excluded), s.id), default=None)
               for b in list_bugs()]
ONE_PER_BUG = [s for s in ONE_PER_BUG if s is not None]


def built(scenario, *extra: str) -> Trainer:
    cfg = compose_run([f"scenario={scenario.id}", "harness.steps=5", *extra])
    return Trainer(cfg, get_bug(cfg.bug.id)).build()


@pytest.mark.parametrize("scenario", ONE_PER_BUG, ids=[s.id for s in ONE_PER_BUG])
def test_a_copy_of_a_planted_model_trains_alone_and_saves(scenario):
    from_the_start = ["bug.onset=0"] if get_bug(scenario.bug).honours_onset else []
    trainer = built(scenario, *from_the_start)  # the patch live, whatever the scenario's onset
    live = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    twin = copy.deepcopy(trainer.model).train()
    batch = next(iter(trainer.train_loader)).to(trainer.device)
    optimizer = torch.optim.SGD(twin.parameters(), lr=0.1)
    twin(*batch.inputs).float().sum().backward()
    optimizer.step()
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, live[name]), name  # buffers (BatchNorm statistics) too
    assert all(p.grad is None for p in trainer.model.parameters())
    buffer = io.BytesIO()
    torch.save(trainer.model, buffer)  # a plant pickles with its model
    buffer.seek(0)
    assert type(torch.load(buffer, weights_only=False)) is type(trainer.model)


@pytest.mark.parametrize("scenario", ONE_PER_BUG, ids=[s.id for s in ONE_PER_BUG])
def test_nothing_reachable_from_the_run_view_names_the_bug(scenario):
    """Through attributes, containers, closures and bound methods: no route to the trainer or
    its configuration (a plant's closure once led to ``trainer.cfg.bug.id``)."""
    trainer = built(scenario)
    leaks = [s for s in _reachable_strings(run_view(trainer)) if scenario.bug in s]
    assert not leaks, leaks[:5]


def test_a_fresh_process_holds_every_bug_module_at_setup():
    """sys.modules of a fresh worker must not hold the planted bug's module alone."""
    code = textwrap.dedent("""
        import sys
        from bugzoo.bugs import bug_ids
        from bugzoo.config import compose_run
        from bugzoo.detector import Detector
        from bugzoo.harness.runner import execute

        class Looker(Detector):
            def setup(self, run):
                super().setup(run)
                Looker.seen = {m for m in sys.modules if m.startswith("bugzoo.bugs.")}

        execute(compose_run(["scenario=mlp-double_softmax", "harness.steps=2"]), [Looker()])
        assert {f"bugzoo.bugs.{b}" for b in bug_ids()} <= Looker.seen, Looker.seen
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "ok", done.stderr[-1500:]


class BreaksAtStep2(Detector):
    """Hooks every forward, turns anomaly mode on, then raises at step 2."""

    name = "breaks"

    def setup(self, run):
        super().setup(run)
        self.calls = 0
        self.hook(run.model.register_forward_hook, self.count)
        self.was = torch.is_anomaly_enabled()
        torch.autograd.set_detect_anomaly(True)

    def count(self, *args):
        self.calls += 1

    def observe(self, obs):
        if obs.step == 2:
            raise RuntimeError("broken")
        return []

    def teardown(self):
        torch.autograd.set_detect_anomaly(self.was)
        return super().teardown()


def test_a_detector_that_raises_is_torn_down_at_once():
    detector = BreaksAtStep2()
    result = execute(compose_run(["scenario=mlp-clean", "harness.steps=8",
                                  "harness.eval_interval=100"]), [detector])
    assert result.summary["outcome"] == "completed"
    assert "broken" in result.summary["detectors"]["breaks"]["error"]
    assert detector.calls == 3  # steps 0-2: its hook is gone from step 3 on
    assert not torch.is_anomaly_enabled()  # the mode it set is restored with it


class FlagsEveryForward(Detector):
    """Queues an alarm from a forward hook at every training step."""

    name = "flags"

    def setup(self, run):
        super().setup(run)
        self.step = 0
        self.hook(run.model.register_forward_hook, self.flag)

    def flag(self, *args):
        if torch.is_grad_enabled() and not self.pending:
            self.queue(self.alarm(self.step, "forward", "unknown", "a forward ran"))

    def observe(self, obs):
        self.step = obs.step + 1
        return self.flush()


def test_alarms_a_hook_queued_survive_a_crash_at_that_step():
    # the in-place bug crashes in the first backward, after the forward hook queued its alarm
    result = execute(compose_run(["scenario=mlp-inplace_op_autograd", "harness.steps=3"]),
                     [FlagsEveryForward()])
    assert result.summary["outcome"] == "crashed"
    assert list(result.alarms["step"]) == [0]


@pytest.mark.slow
def test_a_hung_pooled_run_keeps_what_it_made(tmp_path):
    task = RunTask(get_scenario("mlp-clean"), 0, ("harness.steps=1000000", "harness.eval_interval=1000"),
                   ("always_alarm", "nonfinite"), str(tmp_path), isolate=False, timeout_s=4)
    [record] = list(run_tasks([task], workers=1))
    assert record["outcome"] == "hang"
    summary = store.read_summary(task.path)
    assert summary["hung"] and summary["steps_completed"] > 0
    assert len(store.read_trace(task.path)) == summary["steps_completed"]
    alarms = store.read_alarms(task.path)
    assert list(alarms["detector"]) == ["always_alarm"] and alarms["step"].iloc[0] == 0
