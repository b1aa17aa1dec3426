"""``bugzoo exercise``: the reference notes' guided exercises E.9.1 and E.9.2.

* ``nan-hunt`` (E.9.1, plant a NaN and hunt it down): scenario ``mlp-planted_log_layer`` turns
  on ``log(x - x.min() + 1e-9)`` in the MLP's second layer at step 50; run it with NaN-hunting
  detectors and say which alarm points at the culprit.
* ``overfit-batch`` (E.9.2, overfit a single batch): the smoke test of
  :func:`bugzoo.judge.overfit.overfit_single_batch`; it passes on clean models and fails on broken
  ones (exit code 1), e.g. ``mlp-double_softmax`` or ``mlp-frozen_from_start``.
"""

from __future__ import annotations

import logging
import textwrap
import warnings
from collections.abc import Iterable

from bugzoo.config import compose_run
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.scenarios import get_scenario

NAN_SCENARIO = "mlp-planted_log_layer"
# fp16 autocast: 1e-9 underflows to 0 in half precision, so the log's backward yields NaN
NAN_OVERRIDES = ("harness.precision=fp16", "harness.device=cpu", "harness.steps=80")
NAN_DETECTORS = ("isfinite_hooks", "nan_hooks", "nonfinite", "anomaly")

GUIDES = {
    "nan-hunt": ("E.9.1 Plant a NaN and hunt it down", f"""\
A 3-layer MLP trains normally for a while; then, in half precision, the run breaks. Do not just
print the loss: hunt the producer.
  1. Run it with NaN-hunting detectors watching (forward isfinite hooks on every layer, NaN
     hooks, a non-finite loss sentinel, autograd anomaly mode):
       bugzoo exercise nan-hunt --run
     (the same as: bugzoo run scenario={NAN_SCENARIO} {' '.join(NAN_OVERRIDES)}
      detector=[{','.join(NAN_DETECTORS)}])
  2. Read the alarms in step order. Which detector output points at the NaN, at which step,
     and in which operation or layer?
  3. Open the code it points to and fix what makes the first non-finite value, leaving what
     the model computes on ordinary inputs as it was.
Check your answer: bugzoo exercise nan-hunt --answer"""),
    "overfit-batch": ("E.9.2 Overfit a single batch as a smoke test", """\
Before scaling up, prove the model, loss and optimizer can drive the loss on ONE fixed batch of
8 examples to near zero (no shuffling, no workers). If they cannot, the bug is in the model,
the loss or the optimizer, not in the data pipeline.
  1. bugzoo exercise overfit-batch --scenario mlp-clean            (should PASS)
  2. bugzoo exercise overfit-batch --scenario mlp-double_softmax   (should FAIL: why?)
  3. bugzoo exercise overfit-batch --scenario mlp-frozen_from_start
If the loss stalls, suspects in order: a layer frozen by mistake, a learning rate too low for
a tiny problem, a loss reduction that does not match the gradient scale; then the model."""),
}

ANSWERS = {
    "nan-hunt": """\
Two alarms at step 50 (the onset) point at the producer. The forward isfinite hooks name the
layer: the first non-finite output comes from 'backbone.3', the second Linear, whose inputs
were finite (in half precision 1e-9 rounds to 0, so the log of the smallest value is -inf).
The autograd anomaly detector names the operation: 'LogBackward0 produced NaN in backward', its
stack trace ending at the torch.log(...) call in that layer's forward. Anomaly mode turns the
NaN into an exception, so the run stops there. In float32 the same bug makes no NaN at all but
a gradient explosion from step 50 (see 'bugzoo show planted_log_layer').
Fix: bound the input, e.g. torch.log(F.relu(x) + 1e-3), or drop the transform.""",
    "overfit-batch": """\
Clean models reach a loss below 0.05 on the single batch within a few dozen steps.
double_softmax: CrossEntropyLoss over probabilities cannot go below about log(C) - 1, so the loss
stalls near 1. frozen_from_start: only the head learns on frozen random features; the loss falls
slowly and does not reach the target in time. Both fail the smoke test.""",
}


def nan_hunt() -> list[str]:
    """Run the planted-NaN scenario with the NaN-hunting detectors; the alarms as lines, and
    the line of model code anomaly mode's trace ends at. Nothing else the run says is shown:
    its warnings and the crash's traceback name the files of the catalogue, which give the
    answer away."""
    # torch loads only when an exercise runs, not for listing or reading the guides
    from bugzoo.detector_registry import load_detector
    from bugzoo.harness.runner import execute

    cfg = compose_run([f"scenario={NAN_SCENARIO}", *NAN_OVERRIDES])
    runner_log = logging.getLogger("bugzoo.harness.runner")
    level, runner_log.level = runner_log.level, logging.CRITICAL
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = execute(cfg, [load_detector(name) for name in NAN_DETECTORS])
    finally:
        runner_log.level = level
    lines = [f"step {int(a.step):4d}  {a.detector:15s} {a.message}"
             for a in result.alarms.sort_values("step", kind="stable").itertuples()]
    if code := forward_line(str(w.message) for w in caught):
        lines.append(f"anomaly mode's trace of the forward pass ends at:  {code}")
    lines.append(f"run outcome: {result.summary['outcome']}"
                 + (f" ({result.summary['error']})" if result.summary.get("error") else ""))
    return lines


def forward_line(messages: Iterable[str]) -> str | None:
    """The last line of code in anomaly mode's "Traceback of forward call" warning, without
    the file it is in."""
    for message in messages:
        if "Traceback of forward call" in message:
            code = [line.strip() for line in message.splitlines()
                    if line.startswith("    ") and line.strip()]
            return code[-1] if code else None
    return None


def overfit_batch(scenario: str, steps: int) -> tuple[bool, list[str]]:
    """The single-batch overfit check on one scenario: (passed, report lines)."""
    # torch loads only when an exercise runs, not for listing or reading the guides
    from bugzoo.judge.overfit import overfit_single_batch

    get_scenario(scenario)  # an unknown id: one line with a "did you mean"
    result = overfit_single_batch(compose_run([f"scenario={scenario}"]), steps=steps)
    lines = [f"step {i:4d}  loss {loss:.4f}" for i, loss in enumerate(result["losses"])
             if i % 10 == 0]
    verdict = (f"PASS: loss < 0.05 at step {result['reached_step']}" if result["passed"] else
               f"FAIL: loss still {result['final_loss']:.4f} after {steps} steps on one batch")
    return result["passed"], [*lines, verdict]


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo exercise", description=__doc__.splitlines()[0])
    p.add_argument("name", nargs="?", help=f"one of: {', '.join(GUIDES)}")
    p.add_argument("--run", action="store_true", help="nan-hunt: run it and show the alarms")
    p.add_argument("--answer", action="store_true", help="show the expected answer")
    p.add_argument("--scenario", default="mlp-clean", help="overfit-batch: scenario to test")
    p.add_argument("--steps", type=int, default=200, help="overfit-batch: steps (default 200)")
    args = p.parse_args(argv)
    if args.name is None:
        for name, (title, _) in GUIDES.items():
            print(f"{name:15s} {title}")
        return 0
    if args.name not in GUIDES:
        raise unknown_choice("exercise", args.name, GUIDES)
    title, guide = GUIDES[args.name]
    if args.answer:
        print(f"{title}: answer\n{textwrap.indent(ANSWERS[args.name], '  ')}")
        return 0
    if args.name == "nan-hunt":
        print("\n".join(nan_hunt()) if args.run else f"{title}\n{guide}")
        return 0
    if args.steps < 1:
        raise UsageError("--steps must be at least 1")
    passed, lines = overfit_batch(args.scenario, args.steps)
    print(f"{title}: {args.scenario}\n" + "\n".join(lines))
    return 0 if passed else 1
