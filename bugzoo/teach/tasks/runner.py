"""Train a task script in a process of its own, then evaluate what it trained.

The grader's side of the task contract. :class:`ScriptProcess` starts one process per
script; each :meth:`~ScriptProcess.train` runs the whole script once (``python train.py SEED``,
its output to a log) and reports what the grader checks: the optimizer steps it took (counted
by a global optimizer hook, not by the script), its data source (the global its model family
names, such as ``centres``) and the layers of its global ``model``.
:meth:`~ScriptProcess.evaluate` then sends that model inputs made after the script finished,
and returns its outputs: the labels never enter the script's process, so a script cannot print
or fake its way to a good grade. A run may also be watched by bugzoo detectors (the ``rules``
solver's diagnosis), through the same global optimizer hooks and the live integration the
Lightning and Hugging Face callbacks use.
"""

from __future__ import annotations

import runpy
import sys
import traceback
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import torch
from torch import nn
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from bugzoo.harness.processes import worker_context
from bugzoo.integrations.live import LiveWatch, foreign_view
from bugzoo.teach.tasks import cache

TRAIN_TIMEOUT_S = 300.0  # a task script trains in seconds: past this it is stuck


@dataclass
class Trained:
    """What one run of a script left behind."""

    seed: int
    error: str | None = None  # the last line of its traceback, when it raised
    steps: int = 0  # optimizer steps, counted by the grader's hook
    source: torch.Tensor | None = None  # its data source, when it kept the global's name
    layers: dict[str, int] = field(default_factory=dict)  # parameterised layer type -> count
    losses: list[float] = field(default_factory=list)  # the script's per-step logs, if any
    grad_norms: list[float] = field(default_factory=list)
    observed: dict[str, float] = field(default_factory=dict)  # its ``summary``, if any
    alarms: list[dict] = field(default_factory=list)  # the watching detectors' alarms, if any


def _layers(model: nn.Module) -> dict[str, int]:
    """How many modules of each type hold parameters of their own."""
    layers = Counter(type(m).__name__ for m in model.modules()
                     if any(True for _ in m.parameters(recurse=False)))
    return dict(sorted(layers.items()))


def _floats(values: object) -> list[float]:
    try:
        return [float(v) for v in values]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return []


class _Watching:
    """bugzoo detectors on a script's own loop, through global optimizer hooks: the script's
    ``model``, ``loss`` and settings are read from its namespace (``__main__`` while it runs)."""

    def __init__(self, names: tuple[str, ...]):
        self.watches = [LiveWatch(name) for name in names]
        self.started, self.step = False, 0
        self.handles = [register_optimizer_step_pre_hook(self.before),
                        register_optimizer_step_post_hook(self.after)] if names else []

    @staticmethod
    def _script() -> dict:
        return sys.modules["__main__"].__dict__

    def before(self, optimizer, *_) -> None:
        scope = self._script()
        if not self.started and isinstance(scope.get("model"), nn.Module):
            view = foreign_view(scope["model"], optimizer, num_classes=int(scope.get(
                "CLASSES", 0)), steps=int(scope.get("STEPS", 0)), dataset="task")
            for watch in self.watches:
                watch.start(view)
            self.started = True
        for watch in self.watches if self.started else ():
            watch.step_start()
            watch.before_optimizer_step(optimizer)

    def after(self, *_) -> None:
        scope = self._script()
        loss = scope.get("loss")
        if self.started and isinstance(loss, torch.Tensor):
            for watch in self.watches:
                watch.after_step(self.step, loss.detach(), scope["model"].training)
            self.step += 1

    def finish(self) -> list[dict]:
        for handle in self.handles:
            handle.remove()
        return [{"detector": watch.name, "step": alarm.step, "symptom": alarm.symptom,
                 "category": alarm.category} for watch in self.watches if self.started
                for alarm in [*watch.alarms, *watch.finish()]]


def _serve(conn: Connection, script: str, log: str, source: str | None) -> None:
    """The script's process: train on request, evaluate on request, until told to stop.
    ``source`` names the global that holds the script's data source, kept after each run."""
    torch.set_num_threads(1)
    steps = [0]
    register_optimizer_step_post_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    model: nn.Module | None = None
    with open(log, "a") as out, redirect_stdout(out), redirect_stderr(out):
        while (request := conn.recv()) is not None:
            kind, payload = request
            if kind == "train":
                seed, detectors = payload
                steps[0], model = 0, None
                print(f"$ python {Path(script).name} {seed}", flush=True)
                sys.argv = [script, str(seed)]
                trained, watching = Trained(seed), _Watching(detectors)
                try:
                    scope = runpy.run_path(script, run_name="__main__")
                except BaseException as error:  # the script's own failure is a finding
                    traceback.print_exc(file=out)
                    trained.error = f"{type(error).__name__}: {error}"[:300]
                    scope = {}
                trained.alarms = watching.finish()
                trained.steps = steps[0]
                found = scope.get("model")
                if isinstance(found, nn.Module):
                    model = found
                    trained.layers = _layers(model)
                if source and isinstance(scope.get(source), torch.Tensor):
                    trained.source = scope[source].detach().clone()
                trained.losses = _floats(scope.get("losses", ()))
                trained.grad_norms = _floats(scope.get("grad_norms", ()))
                summary = scope.get("summary")
                if isinstance(summary, dict):
                    trained.observed = {k: float(v) for k, v in summary.items()
                                        if isinstance(v, int | float)}
                conn.send(trained)
            else:  # evaluate
                if model is None:
                    conn.send(None)
                    continue
                model.eval()
                with torch.no_grad():
                    try:
                        conn.send(model(*payload).detach().float())
                    except Exception as error:
                        conn.send(f"{type(error).__name__}: {error}"[:300])


class ScriptProcess:
    """A task script's own process (``with ScriptProcess(script, log) as run: ...``); each run
    keeps the script's global named ``source``, its data source, when given."""

    def __init__(self, script: Path, log: Path, source: str | None = None):
        context = worker_context()
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, str(script), str(log),
                                                             source), daemon=True)
        self.script = script

    def __enter__(self) -> ScriptProcess:
        self._process.start()
        return self

    def __exit__(self, *_) -> None:
        if self._process.is_alive():
            try:
                self._conn.send(None)
            except OSError:
                pass
            self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    def _ask(self, request: tuple, timeout: float) -> object:
        self._conn.send(request)
        if not self._conn.poll(timeout):
            self._process.kill()
            raise TimeoutError(f"{self.script.name} took over {timeout:.0f} s")
        return self._conn.recv()

    def train(self, seed: int, detectors: tuple[str, ...] = ()) -> Trained:
        """Run the script once with ``seed`` (and bugzoo's ``detectors`` watching its loop); its
        model stays for :meth:`evaluate`."""
        try:
            return self._ask(("train", (seed, detectors)),  # type: ignore[return-value]
                             TRAIN_TIMEOUT_S)
        except (TimeoutError, EOFError, OSError) as error:
            return Trained(seed, error=str(error) or "its process died")

    def evaluate(self, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor | str:
        """The last trained model's outputs on ``inputs``, the arguments of its forward (in
        eval mode, without gradients), or why there are none."""
        try:
            outputs = self._ask(("evaluate", inputs), TRAIN_TIMEOUT_S)
        except (TimeoutError, EOFError, OSError) as error:
            return str(error) or "its process died"
        return "the script left no nn.Module named 'model'" if outputs is None else outputs


def trained_runs(script: Path, seeds: list[int], log: Path) -> list[Trained]:
    """Each seed's run of ``script`` (no detectors, no data source kept). A run kept in the cache
    (:mod:`~bugzoo.teach.tasks.cache`) is read from it; the others train in one process, their
    output to ``log``, and are kept when they ended without an error."""
    text = script.read_text()
    keys = {seed: cache.key(text, str(seed)) for seed in seeds}
    runs = {seed: Trained(**kept["trained"]) for seed in seeds
            if (kept := cache.load(keys[seed])) is not None}
    if missing := [seed for seed in seeds if seed not in runs]:
        with ScriptProcess(script, log) as process:
            for seed in missing:
                runs[seed] = process.train(seed)
                if not runs[seed].error:
                    cache.save(keys[seed], {"trained": asdict(runs[seed])})
    return [runs[seed] for seed in seeds]
