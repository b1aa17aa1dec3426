"""Onsets: a plant is invisible before its onset, and a bug that cannot wait says so.

Mid-run scenarios are where time-to-detect means something, so each one's trace must equal its
control's bitwise up to the onset. (rank_skip waits for its onset too: test_distributed.py;
device_mismatch needs CUDA.)
"""

from __future__ import annotations

import functools

import pytest
from conftest import scenario_onset, trace_only

from bugzoo.bugs import list_bugs
from bugzoo.config import compose_run
from bugzoo.errors import UsageError
from bugzoo.harness.runner import execute
from bugzoo.scenarios import list_scenarios
from bugzoo.telemetry import TIMING_COLUMNS


def stable(trace):
    return trace.drop(columns=[c for c in TIMING_COLUMNS if c in trace.columns])


def short_trace(*overrides: str):
    """A short run's trace, for comparing (:func:`conftest.trace_only`)."""
    return stable(execute(trace_only(compose_run(list(overrides)))).trace)


@functools.cache
def clean_trace(control: str, *short: str):
    """A control's trace, once per process for each length: many scenarios share a control."""
    return short_trace(f"scenario={control}", *short)


EVERY_MID_RUN = [s for s in list_scenarios() if not s.clean and not s.isolate
                 and not s.needs_cuda and scenario_onset(s) >= 50]
MODEL_COST = {"mlp": 0, "lstm": 1, "transformer": 2, "resnet": 3}


def mid_run_per_bug() -> list:
    """One mid-run scenario per bug: the plant is one piece of code whatever the model, and the
    test below covers every bug at any onset. Each bug's is on the cheapest model other than
    the one that test uses, so together they watch the plant on two models where it has two."""
    chosen = []
    for bug in sorted({s.bug for s in EVERY_MID_RUN}):
        tested = honouring_scenario(bug).model
        chosen.append(min((s for s in EVERY_MID_RUN if s.bug == bug),
                          key=lambda s: (s.model == tested, MODEL_COST.get(s.model, 9), s.id)))
    return chosen


def honouring_scenario(bug_id: str):
    """The scenario on which a bug's onset is tested at any step (the test below)."""
    return min((s for s in list_scenarios() if s.bug == bug_id),
               key=lambda s: (bool(s.excluded), scenario_onset(s), s.id))


MID_RUN = mid_run_per_bug()


def test_there_are_enough_mid_run_scenarios():
    every = [s.id for s in list_scenarios() if not s.clean and scenario_onset(s) >= 50]
    assert len(every) >= 15, every


@pytest.mark.parametrize("scenario", MID_RUN, ids=[s.id for s in MID_RUN])
def test_a_mid_run_scenario_equals_its_control_until_onset(scenario):
    onset = scenario_onset(scenario)
    # both on the default batch size: the large batches of the leak scenarios only make the
    # leak bigger, and cost a minute here
    short = [f"harness.steps={onset + 3}", "harness.eval_interval=1000", "harness.batch_size=32"]
    buggy = short_trace(f"scenario={scenario.id}", *short)
    clean = clean_trace(scenario.control, *short)
    assert buggy.iloc[:onset].equals(clean.iloc[:onset]), "the plant shows before its onset"
    assert len(buggy) == len(clean) == onset + 3


HONOURING = [b for b in list_bugs() if b.honours_onset and not b.needs_cuda
             and "distributed" not in b.requires]
ONSET = 6


@pytest.mark.parametrize("bug", HONOURING, ids=[b.id for b in HONOURING])
def test_a_bug_that_honours_onset_is_invisible_before_it(bug):
    """Any onset, not only the declared one: a late ``bug.onset`` leaves the run clean."""
    scenario = honouring_scenario(bug.id)
    short = [f"harness.steps={ONSET + 2}", "harness.eval_interval=3"]
    buggy = short_trace(f"scenario={scenario.id}", f"bug.onset={ONSET}", *short)
    assert buggy.iloc[:ONSET].equals(clean_trace(scenario.control, *short).iloc[:ONSET])


REFUSING = [b for b in list_bugs() if not b.honours_onset]


@pytest.mark.parametrize("bug", REFUSING, ids=[b.id for b in REFUSING])
def test_a_bug_that_cannot_wait_refuses_a_late_onset(bug):
    scenario = next(s for s in list_scenarios() if s.bug == bug.id)
    with pytest.raises(UsageError, match=f"bug '{bug.id}' cannot start mid-run"):
        compose_run([f"scenario={scenario.id}", "bug.onset=5"])
    assert compose_run([f"scenario={scenario.id}", "bug.onset=0"]).bug.onset == 0
