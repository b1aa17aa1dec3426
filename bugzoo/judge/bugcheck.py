"""``bugzoo check bug <id>``: the bug author's check, twin of ``bugzoo check`` for detectors.

For a bug (built-in or plug-in) it checks, on short CPU runs of every model the bug lists:

* the card is complete (title, symptom, explanation, BUGGY and FIXED code, onset, models);
* the plant changes the run, and before the onset the trace equals the control's, bitwise (a
  bug planted from step 0 that can wait is planted mid-run for this);
* the run is deterministic for a seed (unless the symptom is that it is not: ``varies``);
* nothing a detector can read (the run view's strings, the environment) names the bug, and
  what code in the run's process can read of the plant (the patches' globals, closures and
  code, the configuration a caller's frame holds, the Trainer the garbage collector finds)
  is the same in the buggy run and in its matched control, its disarmed twin;
* ``validate`` over seeds 0-2, each scenario at its own length, moves the symptom metric the
  declared way (3 seeds against 3 cannot prove it: ``bugzoo results validate`` with 5 seeds does); a
  scenario marked ``unproven`` gives its measured reason instead.

Each model runs the bug's scenario there when one is registered (built-in or ``--include``d),
else the model's default scenario with the bug planted.
"""

from __future__ import annotations

import copy
import gc
import math
import os
import sys
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bugzoo.bugs import Bug, get_bug
from bugzoo.bugs.base import Patch
from bugzoo.config import compose_run
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness.runner import execute
from bugzoo.harness.setup_digest import setup_digest
from bugzoo.harness.watch import run_view
from bugzoo.judge.conformance import _reachable_strings, _stable
from bugzoo.judge.validity import compare, control_overrides, measure_symptom
from bugzoo.scenarios import default_scenario, list_scenarios
from bugzoo.train import Trainer

PLANT_STEPS = 8  # steps before a forced onset, and steps run after the onset
QUICK_SEEDS = (0, 1, 2)
SHORT = ("harness.eval_interval=4", "harness.device=cpu", "seed=0")


class BugCheckError(AssertionError):
    """A bug broke a rule of the catalogue."""


@dataclass(frozen=True)
class Setting:
    """How one model runs the bug and its clean control (overrides of each)."""

    model: str
    buggy: tuple[str, ...]
    control: tuple[str, ...]
    unproven: str | None = None  # why the scenario's symptom is not proven, if it is not


def settings(bug: Bug, models: list[str] | None = None) -> list[Setting]:
    """One setting per model the bug lists (or per one of ``models``): the bug's scenario on
    that model (one starting at the bug's own onset first), else the model's default scenario
    with the bug planted."""
    unknown = [m for m in models or () if m not in bug.models]
    if unknown:
        raise UsageError(f"bug '{bug.id}' does not apply to model(s) {', '.join(unknown)} "
                         f"(it applies to: {', '.join(bug.models)})")
    chosen = []
    for model in [m for m in bug.models if not models or m in models]:
        found = sorted((s for s in list_scenarios() if s.bug == bug.id and s.model == model),
                       key=lambda s: ("onset" in s.bug_config, s.id))
        if found:
            chosen.append(Setting(model, (f"scenario={found[0].id}",),
                                  tuple(control_overrides(found[0])), found[0].unproven))
        else:
            base = f"scenario={default_scenario(model).id}"
            chosen.append(Setting(model, (base, f"bug={bug.id}"), (base,)))
    return chosen


def check_card(bug: Bug) -> str:
    if gaps := bug.card_gaps():
        raise BugCheckError(f"incomplete card: {', '.join(gaps)}")
    return "the card is complete"


@dataclass(frozen=True)
class Short:
    """The short runs of one setting: overrides both runs share, the buggy run's own (an onset
    forced mid-run), and the onset."""

    shared: tuple[str, ...]
    planted: tuple[str, ...]
    onset: int

    def buggy(self, setting: Setting) -> list[str]:
        return [*setting.buggy, *self.shared, *self.planted]

    def control(self, setting: Setting) -> list[str]:
        return [*setting.control, *self.shared]


def short_runs(bug: Bug, setting: Setting) -> Short:
    """A bug planted from step 0 that can wait starts at step ``PLANT_STEPS`` instead, so the
    steps before it can be compared with the control's; the run goes on ``PLANT_STEPS`` more."""
    onset = int(compose_run([*setting.buggy, *SHORT]).bug.onset)
    planted: tuple[str, ...] = ()
    if onset == 0 and bug.honours_onset:
        onset, planted = PLANT_STEPS, (f"bug.onset={PLANT_STEPS}",)
    return Short((f"harness.steps={onset + PLANT_STEPS}", *SHORT), planted, onset)


def check_plant(bug: Bug, setting: Setting) -> str:
    """The plant changes the run, and not before its onset."""
    short = short_runs(bug, setting)
    onset = short.onset
    buggy = execute(compose_run(short.buggy(setting)))
    control = execute(compose_run(short.control(setting)))
    b, c = _stable(buggy.trace), _stable(control.trace)
    # (from step 0 there is nothing before the onset; a run that crashes in its first step has
    # an empty trace, without a step column)
    before = ((b[b.step < onset].reset_index(drop=True), c[c.step < onset].reset_index(drop=True))
              if onset else (c.iloc[:0], c.iloc[:0]))
    if not before[0].equals(before[1]):
        raise BugCheckError(f"the trace differs from the control's before the onset (step "
                            f"{onset}): a plant must be invisible until it starts")
    metric = bug.check.metric
    if b.equals(c) and buggy.summary.get(metric) == control.summary.get(metric):
        raise BugCheckError(f"the plant changes nothing: over {onset + PLANT_STEPS} steps the "
                            f"trace and {metric} equal the control's")
    if onset == 0:
        return "the plant changes the run (it is planted when the run is built: from step 0)"
    return f"the plant changes the run, and before step {onset} the trace equals the control's"


def check_deterministic(bug: Bug, setting: Setting) -> str:
    """Two runs of one seed give the same trace, bitwise."""
    if bug.check.direction == "varies":
        return "not required: the symptom is that two runs of one seed disagree"
    cfg = short_runs(bug, setting).buggy(setting)
    first, second = (_stable(execute(compose_run(cfg)).trace) for _ in range(2))
    if not first.equals(second):
        raise BugCheckError("two runs with seed 0 give different traces: seed every source of "
                            "randomness the plant uses from the run")
    return "two runs of one seed give the same trace"


def names_of(bug: Bug) -> set[str]:
    """What would give the bug away: its id, its name without the namespace, its class name."""
    names = {bug.id, bug.id.rsplit("/", 1)[-1]}
    if type(bug) is not Bug:
        names.add(type(bug).__name__)
    return names


def check_blind(bug: Bug, setting: Setting) -> str:
    """No string a detector can reach from the run view, nor the environment, names the bug;
    and the buggy run and its disarmed twin show the same plant to code in their process."""
    cfg = compose_run(short_runs(bug, setting).buggy(setting))
    twin_cfg = copy.deepcopy(cfg)  # a plant may edit the buggy run's configuration
    trainer = Trainer(cfg, bug).build()
    names = names_of(bug)
    leaks = sorted(s for s in _reachable_strings(run_view(trainer)) if any(n in s for n in names))
    leaks += sorted(f"env {k}" for k, v in os.environ.items()
                    if any(n in k or n in v for n in names))
    if leaks:
        raise BugCheckError(f"a detector can read the bug's name: {leaks[:5]}")
    twin_trainer = Trainer(twin_cfg, bug, armed=False).build()
    buggy, twin = plant_evidence(trainer), plant_evidence(twin_trainer)
    if not bug.patches_only:  # its control runs without the plant: only the label must match
        buggy.pop("patches"), twin.pop("patches")
    if buggy != twin:
        differs = sorted(k for k in buggy if buggy[k] != twin.get(k))
        raise BugCheckError(f"the buggy run and its control differ in what code in their "
                            f"process can read: {differs}")
    # not a rule, a fact the author should know: where the setup differs, a reader of the
    # defaults tells the pair apart, so the board scores the bug apart
    visible = setup_digest(run_view(trainer)) != setup_digest(run_view(twin_trainer))
    return ("nothing a detector can read names the bug, and its control shows the same "
            + ("plant" if bug.patches_only else "label")
            + ("; its setup differs from its control's (settings or structure), so the board "
               "scores it apart, with the bugs visible at setup" if visible else ""))


def plant_evidence(trainer: Trainer, limit: int = 200_000) -> dict:
    """What code in a run's process can read of the plant from the Trainer (which the garbage
    collector finds, and whose configuration a caller's frame holds): its bug, its
    configuration's bug, scenario and onset, and every patched method reachable from it, with
    its replacement's globals, closure and code (file and name)."""
    with warnings.catch_warnings():  # the walk touches deprecated attributes of torch modules
        warnings.simplefilter("ignore")
        patches = _patches_reachable(trainer, limit)
    cfg = trainer.cfg
    return {"bug": getattr(trainer.bug, "id", None), "config_bug": str(cfg.get("bug")),
            "scenario": cfg.get("scenario"), "onset": trainer.onset,
            "patches": sorted(patches, key=str)}


def _patches_reachable(start: object, limit: int) -> list[tuple]:
    """Every Patch among the objects reachable from ``start`` (up to ``limit`` objects, nearest
    first), described. The walk goes breadth first, one ``gc.get_referents`` call per layer.
    Objects the garbage collector does not track (numbers, strings, containers of only those)
    are skipped: they can hold no Patch, and they were most of the graph, so the walk once ran
    out of ``limit`` before it reached the plant. Classes and modules are not walked, nor a
    module's namespace reached through one of its functions' globals: they hold the program's
    code, not the run's objects (a plant patches instances, :func:`~bugzoo.bugs.base.patch_method`),
    and through them the walk spread over all of torch."""
    namespaces = {id(vars(m)) for m in list(sys.modules.values())
                  if isinstance(m, types.ModuleType)}
    patches, seen, layer = [], set(), [start]
    while layer and len(seen) < limit:
        fresh = []
        for obj in layer:
            if id(obj) in seen or id(obj) in namespaces \
                    or isinstance(obj, type | types.ModuleType):
                continue
            seen.add(id(obj))
            fresh.append(obj)
            if isinstance(obj, Patch):
                replacement = obj.replacement
                planted = replacement.__globals__.get("BUG")
                patches.append((obj.__name__, getattr(planted, "id", None),
                                Path(replacement.__code__.co_filename).name,
                                replacement.__code__.co_name,
                                tuple(type(c.cell_contents).__name__
                                      for c in replacement.__closure__ or ()),
                                obj.clock.onset if obj.clock else None))
        layer = [o for o in gc.get_referents(*fresh) if gc.is_tracked(o)]
    return patches


def check_validate(bug: Bug, setting: Setting) -> str:
    """A sign check, not a test: the symptom metric moves the declared way on quick settings
    (an unproven scenario, which shows none in its setting, says why instead). 3 seeds against
    3 cannot prove a symptom; ``bugzoo results validate`` tests it over 5."""
    if setting.unproven:
        return f"not required: the scenario is unproven ({setting.unproven})"
    metric, direction = bug.check.metric, bug.check.direction
    # the scenario at its own length: a symptom may take the whole run to show, and a bug that
    # starts at step 150 shows nothing in a short one
    quick = ["harness.device=cpu"]
    buggy = [measure_symptom([*setting.buggy, *quick], s, metric, direction) for s in QUICK_SEEDS]
    clean = [measure_symptom([*setting.control, *quick], s, metric, direction)
             for s in QUICK_SEEDS]
    result = compare(metric, direction, buggy, clean)
    effect = result.effect
    moved = (effect < 0 if direction == "lower" else effect > 0) if not math.isnan(effect) \
        else result.p_value < 0.5  # no finite buggy value: every buggy run was the worst
    seen = f"{metric} {direction}: effect {effect:+.3g}, p = {result.p_value:.2g}"
    what = (f"sign check ({len(QUICK_SEEDS)} seeds at the scenario's length; a sign, not a test: "
            "`bugzoo results validate` tests over 5 seeds)")
    if not moved:
        raise BugCheckError(f"{what} did not see the symptom ({seen}; buggy {buggy}, "
                            f"clean {clean})")
    return f"{what} sees {seen}"


PER_MODEL = (check_plant, check_deterministic, check_blind, check_validate)


def bug_checks(bug_id: str, models: list[str] | None = None
               ) -> Iterator[tuple[str, str | BugCheckError]]:
    """Run every check on every model the bug lists, yielding (check, what it found), or
    (check, the BugCheckError) for one that failed: a failure does not stop the others."""
    bug = get_bug(bug_id)
    chosen = settings(bug, models)
    checks = [("check_card", lambda: check_card(bug))]
    checks += [(f"{check.__name__} [{setting.model}]", lambda c=check, s=setting: c(bug, s))
               for setting in chosen for check in PER_MODEL]
    for name, check in checks:
        try:
            yield name, check()
        except BugCheckError as e:
            yield name, e


def check_bug(bug_id: str, models: list[str] | None = None) -> list[str]:
    """Run every check on the bug; raise BugCheckError naming the first check that failed,
    else return the names of the checks passed (for a plug-in's own tests)."""
    passed = []
    for name, found in bug_checks(bug_id, models):
        if isinstance(found, BugCheckError):
            raise BugCheckError(f"{name}: {found}")
        passed.append(name)
    return passed


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo check bug", description=__doc__.splitlines()[0])
    p.add_argument("bug", help="a bug id, e.g. double_softmax or mylab/label_noise")
    p.add_argument("--model", dest="models", nargs="+", metavar="MODEL",
                   help="only these of the bug's models (default: all it lists)")
    args = p.parse_args(argv)
    passed, failed = 0, 0
    for name, found in bug_checks(args.bug, args.models):
        if isinstance(found, BugCheckError):
            print(f"FAIL {name}: {found}", file=sys.stderr)
            failed += 1
        else:
            print(f"ok   {name}: {found}")
            passed += 1
    if failed:
        print(f"bugzoo check bug: {args.bug} breaks a rule of the catalogue in {failed} of "
              f"{passed + failed} checks", file=sys.stderr)
        return 1
    print(f"{args.bug} passes all {passed} checks")
    return 0

