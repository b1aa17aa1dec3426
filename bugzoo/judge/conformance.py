"""The detector conformance suite, in the spirit of ``sklearn.utils.estimator_checks``.

``check_detector(name_or_class, **params)`` runs every check on short CPU runs of the ``mlp``
model and raises :class:`ConformanceError` with a message naming the broken rule.
``parametrize_with_checks`` turns the suite into pytest cases for a third party's own tests::

    from bugzoo.judge.conformance import parametrize_with_checks

    @parametrize_with_checks([MyDetector, "nonfinite"])
    def test_conformance(detector, check):
        check(detector)

``bugzoo check detector NAME [param=value ...]`` runs it from the command line.
"""

from __future__ import annotations

import copy
import gc
import os
import random
import secrets
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from functools import cache

import numpy as np
import pandas as pd
import torch
import torch.optim.optimizer as optimizer_module
import yaml
from omegaconf import DictConfig, open_dict
from torch import nn

from bugzoo.bugs import CATEGORIES, Bug, bug_modules, get_bug
from bugzoo.config import compose_run
from bugzoo.detector import Alarm, Detector
from bugzoo.detector_registry import load_detector, user_params
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import honeypot
from bugzoo.harness.record import RunResult
from bugzoo.harness.runner import execute
from bugzoo.harness.watch import run_view
from bugzoo.scenarios import registry
from bugzoo.telemetry import TIMING_COLUMNS
from bugzoo.train import Trainer

STEPS = 30
BASE = ("scenario=mlp-clean", f"harness.steps={STEPS}", "harness.eval_interval=10",
        "harness.device=cpu", "seed=0")
# A clean run driven hard (constant lr 30): it gives typical detectors something to alarm on.
TROUBLED = ("optim.lr=30.0", "optim.schedule=constant")
BUGGY_SCENARIO = "mlp-double_softmax"  # a real planted bug, for the blindness scan
# buggy runs whose plant patches a module's forward (the log layer's from step 10); each stays
# finite for the whole check run, so a detector that turns NaN into a crash (anomaly mode) is
# judged on what it changes, not on the NaN it exists to stop at
PATCHED_MODELS = (("scenario=mlp-double_softmax",), ("scenario=mlp-detached_graph",),
                  ("scenario=mlp-int_cast_in_forward",), ("scenario=mlp-softmax_wrong_dim",),
                  ("scenario=mlp-planted_log_layer", "bug.onset=10"))

Factory = Callable[[], Detector]


class ConformanceError(AssertionError):
    """A detector broke a rule of the detector API."""


def detector_factory(detector: str | type[Detector] | Factory, **params) -> Factory:
    """A callable making fresh instances from an entry-point name, a class or a factory."""
    if isinstance(detector, str):
        load_detector(detector, **params)  # fail now, with a "did you mean", on a bad name
        return lambda: load_detector(detector, **params)

    def make() -> Detector:
        made = detector(**params)
        if not isinstance(made, Detector):
            raise ConformanceError(f"{detector!r} made a {type(made).__name__}, not a "
                                   "bugzoo.detector.Detector")
        if type(made).name == Detector.name and "name" not in vars(made):
            made.name = getattr(detector, "__name__", "detector").lower()
        return made

    make.__name__ = getattr(detector, "__name__", "detector")
    return make


def _cfg(*extra: str) -> DictConfig:
    """A check run's config: a copy, so that no run changes the next one's."""
    return copy.deepcopy(_composed(extra))


@cache
def _composed(extra: tuple[str, ...]) -> DictConfig:
    """Composed once per process for each set of overrides: the checks of every detector run
    the same few configurations, and a Hydra composition costs more than a 30-step run."""
    return compose_run([*BASE, *extra])


def _run(cfg, detectors: list[Detector] = (), bug: Bug | None = None, armed: bool = True,
         decoy: bool = False) -> RunResult:
    """A check run; a detector error fails it, except on a ``decoy`` pair's runs, which compare
    alarms only (a scenario drawn at random may trip a detector alike on both)."""
    result = execute(cfg, list(detectors), bug=bug, armed=armed, honeypot=decoy)
    for name, status in result.summary["detectors"].items():
        if status["error"] and not decoy:
            raise ConformanceError(f"detector {name} failed during a run: {status['error']}")
    if result.summary["outcome"] != "completed":
        raise ConformanceError(f"the check run itself failed: {result.summary['error']}")
    return result


def _alarms(result: RunResult) -> list[tuple]:
    return [tuple(r) for r in result.alarms[["step", "symptom", "category", "message"]]
            .itertuples(index=False)]


def _stable(trace: pd.DataFrame) -> pd.DataFrame:
    return trace.drop(columns=[c for c in TIMING_COLUMNS if c in trace.columns])


@cache
def _baseline(extra: tuple[str, ...]) -> pd.DataFrame:
    return _stable(_run(_cfg(*extra)).trace)


def _rng_state() -> tuple:
    return (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())


def _same_rng(a: tuple, b: tuple) -> bool:
    return torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]


def _instrument(detector: Detector, on_call: Callable[[str, tuple, object], None]) -> Detector:
    """Route ``setup``/``observe``/``teardown`` of one instance through ``on_call``."""
    for method in ("setup", "observe", "teardown"):
        original = getattr(detector, method)

        def wrapper(*args, _original=original, _method=method):
            before = _rng_state()
            out = _original(*args)
            if not _same_rng(before, _rng_state()):
                raise ConformanceError(
                    f"{_method}() changed the global random state (torch, numpy or random): "
                    "a detector must not seed or draw from the training run's RNGs")
            on_call(_method, args, out)
            return out

        setattr(detector, method, wrapper)
    return detector


# ----------------------------------------------------------------------------- checks
def check_init_stores_params(make: Factory) -> None:
    """``__init__`` only stores parameters: no tensors, modules or RNG draws."""
    before = _rng_state()
    detector = make()
    if not _same_rng(before, _rng_state()):
        raise ConformanceError("__init__ changed the global random state")
    for key, value in vars(detector).items():
        if isinstance(value, torch.Tensor | nn.Module):
            raise ConformanceError(f"__init__ created state {key!r} ({type(value).__name__}); "
                                   "create state in setup(run), keep __init__ to parameters")


def check_independent_setups(make: Factory) -> None:
    """Two instances share no mutable state they created, and setup() resets a reused one.

    Handles on the run's own objects (model, modules, parameters, buffers, optimizer, loss,
    loaders, the run view) are what a monitor keeps, so both instances watching one run may
    hold the same ones; only a mutable object that neither came from the run nor is a plain
    value, held by both, is shared state (a class-level list, a mutable default argument)."""
    trainer = Trainer(_cfg()).build()
    view = run_view(trainer)
    of_the_run = {id(obj) for obj in _reachable(view, limit=200_000)}
    a, b = make(), make()
    a.setup(view)
    b.setup(view)
    try:
        for key, value in vars(a).items():
            if id(value) in of_the_run or isinstance(
                    value, str | bytes | int | float | bool | tuple | types.NoneType | frozenset):
                continue
            if vars(b).get(key) is value:
                raise ConformanceError(
                    f"two instances share the same {type(value).__name__} object in attribute "
                    f"{key!r} after setup(); create mutable state inside setup(), not at class "
                    "level or in __init__ defaults")
    finally:  # last in, first out: global state one setup saved and changed unwinds in order
        b.teardown()
        a.teardown()
    cfg = _cfg(*TROUBLED)
    reused = make()
    fresh = _alarms(_run(cfg, [reused]))
    again = _alarms(_run(cfg, [reused]))
    if fresh != again:
        raise ConformanceError(
            "the same run gave different alarms from a fresh instance and a reused one "
            f"(fresh {fresh}, reused {again}): setup(run) must reset all state")


def check_non_invasive(make: Factory) -> None:
    """A CPU run's trace is bitwise identical with and without the detector: a clean run, a
    troubled one, and buggy runs whose plant patches the model (a detector that copies or
    probes the model must not train the live one through the patch)."""
    for extra in ((), TROUBLED, *PATCHED_MODELS):
        detector = _instrument(make(), lambda *a: None)
        watched = _stable(_run(_cfg(*extra), [detector]).trace)
        bare = _baseline(extra)
        if watched.equals(bare):
            continue
        where = "a different number of steps"
        if watched.shape == bare.shape and list(watched.columns) == list(bare.columns):
            diff = (watched != bare) & ~(watched.isna() & bare.isna())
            step, col = next((i, c) for i in diff.index for c in diff.columns if diff.at[i, c])
            where = (f"column {col!r} at step {step}: {bare.at[step, col]!r} without the "
                     f"detector, {watched.at[step, col]!r} with it")
        raise ConformanceError(
            f"invasive: the detector changed the training run ({where}); a detector may "
            "observe but must not change parameters, gradients, lr, data or RNG state")


HOOK_GLOBALS = [
    (nn.modules.module, name) for name in dir(nn.modules.module) if name.startswith("_global_")
    and name.endswith("hooks")] + [
    (optimizer_module, name) for name in dir(optimizer_module)
    if name.startswith("_global_") and name.endswith("hooks")]


def _hooks_left(obj, label: str) -> Iterator[str]:
    for key, value in vars(obj).items():
        if key.endswith("hooks") and isinstance(value, dict) and value:
            yield f"{label}.{key} ({len(value)})"
        elif isinstance(value, types.FunctionType | types.MethodType) \
                and not key.startswith("__"):
            yield f"{label}.{key} (a function patched onto the instance)"


def _attachments(trainer: Trainer) -> list[str]:
    """Hooks and instance-level function patches on a trainer's model, optimizer and loss."""
    left: list[str] = []
    for name, module in trainer.model.named_modules():
        left += _hooks_left(module, f"model{'.' + name if name else ''}")
    for name, param in trainer.model.named_parameters():
        hooks = getattr(param, "_backward_hooks", None)
        if hooks:
            left.append(f"parameter {name} backward hooks ({len(hooks)})")
        post = getattr(param, "_post_accumulate_grad_hooks", None)
        if post:
            left.append(f"parameter {name} post-accumulate-grad hooks ({len(post)})")
    left += _hooks_left(trainer.optimizer, "optimizer")
    left += _hooks_left(trainer.loss_fn, "loss_fn")
    return left


@cache
def _unwatched_attachments() -> frozenset[str]:
    """What an unwatched check run leaves attached (the loop's own hooks), once per process."""
    return frozenset(_attachments(_run(_cfg()).trainer))


def check_teardown_removes_hooks(make: Factory) -> None:
    """After teardown() no hook or instance patch is left on model, params, optimizer, loss
    (beyond what an unwatched run has), and torch's global hook tables are as before."""
    global_before = {name: len(getattr(mod, name)) for mod, name in HOOK_GLOBALS}
    baseline = _unwatched_attachments()
    left = [a for a in _attachments(_run(_cfg(), [make()]).trainer) if a not in baseline]
    for mod, name in HOOK_GLOBALS:
        if len(getattr(mod, name)) != global_before[name]:
            left.append(f"global {mod.__name__}.{name}")
    if left:
        raise ConformanceError("teardown() left hooks or patches behind: " + ", ".join(left))


def _reachable(root, limit: int = 20000) -> Iterator[object]:
    """Every object reachable from ``root`` through attributes, containers, the variables a
    function closes over and the object a method is bound to (tensors and arrays are yielded,
    not looked into; types, modules and a function's globals end a path)."""
    seen: set[int] = set()
    stack = [root]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                with suppress(ValueError):  # an empty cell
                    stack.append(cell.cell_contents)
            stack.extend(obj.__defaults__ or ())
            continue
        if isinstance(obj, types.MethodType):
            stack.extend((obj.__self__, obj.__func__))
            continue
        if isinstance(obj, str | torch.Tensor | np.ndarray | types.BuiltinFunctionType | type
                      | types.ModuleType):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            stack.extend(vars(obj).items())


def _reachable_strings(root) -> set[str]:
    """Strings reachable from ``root``, with the names of the types and functions on the way."""
    found: set[str] = set()
    for obj in _reachable(root):
        if isinstance(obj, str):
            found.add(obj)
        elif not isinstance(obj, torch.Tensor | np.ndarray):
            kind = type(obj)
            found.update((kind.__name__, kind.__qualname__, kind.__module__))
            if isinstance(obj, types.FunctionType | types.MethodType | types.BuiltinFunctionType):
                found.update(str(getattr(obj, k, "")) for k in ("__name__", "__qualname__",
                                                                "__module__"))
    return found


def check_blind(make: Factory) -> None:
    """The detector cannot tell which bug is planted.

    Two decoy bugs with random ids and different categories, planted as real ones are (a
    patched seam from an onset, the bug in the patch's module globals and its id in the code's
    file name, the bug in the run's configuration, the Trainer and the caller's frames), change
    nothing in the run, so alarms must equal those on the clean run; a detector that finds the
    planted bug (through globals, code objects, closures, frames, gc, env vars, ...) and reacts
    to it is caught. Alarm texts must
    not contain the decoy's id. Also scans what a detector can read in a real buggy run for
    the bug id: the strings reachable from the RunView (through attributes, closures and bound
    methods), the environment, and which bug modules ``sys.modules`` holds at its setup (all
    of them, or it would single out the planted one).
    """
    _composed.cache_clear()  # no other check's buggy config may be found instead
    cfg = _cfg(*TROUBLED)
    gc.collect()  # the patches of earlier runs in this process must not be found instead
    clean = _alarms(_run(cfg, [make()]))
    for category in ("loss", "optim"):
        decoy = honeypot.made_up(category)
        with open_dict(cfg):
            cfg.bug = {"id": decoy.id, "onset": honeypot.DECOY_ONSET, "params": {}}
        try:
            alarms = _alarms(_run(cfg, [make()], bug=decoy))
        finally:
            with open_dict(cfg):
                cfg.bug = None
        if any(decoy.id in str(part) for alarm in alarms for part in alarm):
            raise ConformanceError(
                f"peeking: an alarm names the planted bug's id {decoy.id!r}: {alarms}")
        if alarms != clean:
            raise ConformanceError(
                f"peeking: a no-op planted bug (category {category}) changed the alarms "
                f"(clean run {clean}, with the bug {alarms}); the detector must only react to "
                "what the run does, not to which bug is planted")
    if BUGGY_SCENARIO in registry():
        buggy_cfg = _cfg(f"scenario={BUGGY_SCENARIO}")
        bug = get_bug(buggy_cfg.bug.id)
        trainer = Trainer(buggy_cfg, bug).build()
        leaks = sorted(s for s in _reachable_strings(run_view(trainer)) if bug.id in s)
        leaks += sorted(f"env {k}" for k, v in os.environ.items() if bug.id in k or bug.id in v)
        if leaks:
            raise ConformanceError(f"the run view leaks the bug id {bug.id!r}: {leaks[:5]}")
        loaded: list[set[str]] = []

        def record(method: str, args: tuple, out) -> None:
            if method == "setup":
                loaded.append(set(sys.modules))

        _run(_cfg(f"scenario={BUGGY_SCENARIO}", "harness.steps=2"), [_instrument(make(), record)])
        missing = bug_modules() - loaded[0]
        if missing:
            raise ConformanceError(f"sys.modules at setup holds only some bug modules (not "
                                   f"{sorted(missing)[:3]}...): it singles out the planted one")


HONEYPOT_MODELS = ("mlp", "lstm")  # cheap to train; the check draws one
HONEYPOT_STEPS = (20, 40)


def check_honeypots(make: Factory) -> None:
    """The detector alarms alike on both runs of a decoy pair.

    The pair impersonates a buggy scenario drawn at random (its id, card and settings; a
    model, a length and a seed drawn too, so the check cannot be recognised), with a
    plant that changes nothing (:mod:`bugzoo.harness.honeypot`), once armed and once disarmed:
    the two runs are the same run, and a detector that alarms differently has read which is
    armed, or which bug is planted, instead of what the run does."""
    draw = secrets.SystemRandom()
    candidates = [s for s in registry().values() if not s.clean and not s.isolate
                  and not s.needs_cuda and s.model in HONEYPOT_MODELS]
    scenario = draw.choice(sorted(candidates, key=lambda s: s.id))
    cfg = compose_run([f"scenario={scenario.id}", f"harness.steps={draw.randint(*HONEYPOT_STEPS)}",
                       "harness.eval_interval=10", "harness.device=cpu",
                       f"seed={draw.randrange(2**32)}"])
    decoy = honeypot.impersonating(get_bug(cfg.bug.id))
    runs = {armed: _alarms(_run(copy.deepcopy(cfg), [make()], decoy, armed, decoy=True))
            for armed in (True, False)}
    if runs[True] != runs[False]:
        raise ConformanceError(
            f"honeypot: on a decoy pair impersonating {scenario.id} (a plant that changes "
            f"nothing) the detector alarmed {runs[True]} on the armed run and {runs[False]} on "
            "the disarmed one; the two runs are the same run")


def check_alarms_well_formed(make: Factory) -> None:
    """observe() returns a list of Alarm with int step in range, known category, text."""
    raw: list[tuple[int, object]] = []

    def record(method: str, args: tuple, out) -> None:
        if method == "observe":
            raw.append((args[0].step, out))

    _run(_cfg(*TROUBLED), [_instrument(make(), record)])
    valid = set(CATEGORIES) | {"unknown"}
    for step, out in raw:
        if out is None:
            continue
        if not isinstance(out, list | tuple):
            raise ConformanceError(f"observe() at step {step} returned a {type(out).__name__}; "
                                   "return a list of Alarm")
        for alarm in out:
            problem = None
            if not isinstance(alarm, Alarm):
                problem = f"a {type(alarm).__name__}, not a bugzoo.detector.Alarm"
            elif not isinstance(alarm.step, int) or not 0 <= alarm.step <= step:
                problem = f"step {alarm.step!r} is not an int in [0, current step {step}]"
            elif alarm.category not in valid:
                problem = f"category {alarm.category!r} is not in {sorted(valid)}"
            elif not (isinstance(alarm.symptom, str) and alarm.symptom
                      and isinstance(alarm.message, str)):
                problem = "symptom must be a non-empty str and message a str"
            if problem:
                raise ConformanceError(f"malformed alarm at step {step}: {problem}")


CHECKS: list[Callable[[Factory], None]] = [
    check_init_stores_params, check_independent_setups, check_non_invasive,
    check_teardown_removes_hooks, check_blind, check_honeypots, check_alarms_well_formed]


def check_detector(detector: str | type[Detector] | Factory, **params) -> list[str]:
    """Run every check; raise ConformanceError on the first failure, else return their names."""
    make = detector_factory(detector, **params)
    for check in CHECKS:
        try:
            check(make)
        except ConformanceError as e:
            raise ConformanceError(f"{check.__name__}: {e}") from None
    return [c.__name__ for c in CHECKS]


def parametrize_with_checks(detectors: list, expected_failed_checks: Mapping[str, str]
                            | Callable[[object], Mapping[str, str]] | None = None) -> Callable:
    """A ``pytest.mark.parametrize`` over (detector, check) pairs; each test calls
    ``check(detector)``. Entries are entry-point names, classes or zero-argument factories.

    ``expected_failed_checks`` names the checks a tool legitimately cannot meet, with the
    reason: ``{check name: reason}`` for every entry, or a function of the entry returning one.
    Those cases are strict ``xfail``: a check that starts passing fails the suite, so the list
    stays true."""
    import pytest  # a dev dependency: only the test suites that call this have it

    def expected(detector) -> Mapping[str, str]:
        if callable(expected_failed_checks):
            return expected_failed_checks(detector)
        return expected_failed_checks or {}

    unknown = {name for d in detectors for name in expected(d)} - {c.__name__ for c in CHECKS}
    if unknown:
        raise ValueError(f"expected_failed_checks names unknown checks: {sorted(unknown)}")
    cases = []
    for detector in detectors:
        failing = expected(detector)
        for check in CHECKS:
            reason = failing.get(check.__name__)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            cases.append(pytest.param(
                detector, _bound(check), marks=marks,
                id=f"{getattr(detector, '__name__', detector)}-{check.__name__}"))
    return pytest.mark.parametrize(("detector", "check"), cases)


def _bound(check: Callable[[Factory], None]) -> Callable:
    def run(detector) -> None:
        check(detector_factory(detector))

    run.__name__ = check.__name__
    return run


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo check detector",
                       description="Run the conformance suite on one detector.")
    p.add_argument("detector", help="an installed detector's entry-point name")
    p.add_argument("params", nargs="*", metavar="KEY=VALUE", help="detector parameters")
    p.add_argument("--only", nargs="+", metavar="CHECK", choices=[c.__name__ for c in CHECKS],
                   help="run only these checks (default: all, in order): "
                        + ", ".join(c.__name__ for c in CHECKS))
    args = p.parse_args(argv)
    params = {}
    for item in args.params:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"detector parameters are KEY=VALUE, got {item!r}")
        params[key] = yaml.safe_load(value)
    make = detector_factory(args.detector, **params)
    user_params(args.detector, params)  # and in the ranges the detector declares
    checks = [c for c in CHECKS if not args.only or c.__name__ in args.only]
    for check in checks:
        try:
            check(make)
        except ConformanceError as e:
            print(f"FAIL {check.__name__}: {e}", file=sys.stderr)
            print(f"bugzoo check: {args.detector} does not conform", file=sys.stderr)
            return 1
        print(f"ok   {check.__name__}")
    print(f"{args.detector} passes {'all ' if len(checks) == len(CHECKS) else ''}"
          f"{len(checks)} checks")
    return 0
