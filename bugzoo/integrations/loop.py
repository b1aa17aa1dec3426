"""bugzoo's sealed detectors on a plain PyTorch loop: :func:`watch`, and the trace it writes.

::

    with bugzoo.watch(model, optimizer, num_classes=10, steps=1000, trace="run.trace") as w:
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            w.step(loss)  # optional where the loss is a local named ``loss`` of the loop

The watch hangs on the optimizer's own step hooks: before each step it measures the gradients,
after it the parameters, and it reads the step's loss from :meth:`LoopWatch.step` or, failing
that, from the local variable ``loss`` of the code that called ``optimizer.step()``. Each step
becomes one record of the bugzoo trace (:mod:`bugzoo.trace`), streamed to the sealed detectors
as it is made; it only reads tensors, so the loop computes exactly what it would unwatched.
Each alarm is logged once. The trace folder (``facts.json``, ``trace.parquet``,
``layer_grad_norms.parquet``, ``alarms.csv``) is what ``bugzoo check-trace`` rescores.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from types import FrameType

import pandas as pd
import torch
from torch import nn

from bugzoo.detector import is_sealed
from bugzoo.detector_registry import detector_class, load_detector, select_detectors
from bugzoo.errors import UsageError
from bugzoo.harness.store import ALARM_COLUMNS, LAYERS_FILE
from bugzoo.harness.watch import Watch, call_all
from bugzoo.telemetry import Observation, Telemetry, observations, trace_tables
from bugzoo.trace import TRACE_VERSION, RunFacts

log = logging.getLogger(__name__)

DEFAULT_DETECTORS = ("builtins",)  # bugzoo's heuristics, narrowed to the sealed ones
FACTS_FILE, TRACE_FILE, ALARMS_FILE = "facts.json", "trace.parquet", "alarms.csv"


class StopTraining(Exception):  # noqa: N818 - it is a request, not an error
    """Raised out of ``optimizer.step()`` at the first alarm of a watch made with
    ``stop_on_alarm=True``; the ``with`` block of :func:`watch` ends quietly on it."""


def sealed_detectors(words: list[str] | tuple[str, ...]) -> list[str]:
    """The sealed detectors ``words`` select (names and selectors, as ``--detectors`` reads
    them); a named one that is not sealed is a UsageError, one a selector brings in is left
    out."""
    named = {w for word in words for w in word.split(",")}
    chosen = []
    for name in select_detectors(list(words)):
        if is_sealed(detector_class(name)):
            chosen.append(name)
        elif name in named:
            raise UsageError(f"detector {name} cannot watch a plain loop: it is not sealed (it "
                             "instruments bugzoo's own trainer)")
    if not chosen:
        raise UsageError("no detector to watch with: none selected is sealed")
    return chosen


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The first frame, going outwards from ``frame``, whose code is neither torch's nor
    bugzoo's: the loop that called ``optimizer.step()``."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.split(".")[0] in ("torch", "bugzoo") or module == __name__):
            return frame
        frame = frame.f_back
    return None


def loss_in(frame: FrameType | None) -> torch.Tensor | None:
    """The frame's local (or, at a script's top level, global) ``loss``, if it is a one-element
    tensor."""
    if frame is None:
        return None
    value = frame.f_locals.get("loss", frame.f_globals.get("loss"))
    return value if isinstance(value, torch.Tensor) and value.numel() == 1 else None


class LoopWatch:
    """A plain loop's optimizer watched by sealed detectors (made by :func:`watch`)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, *,
                 detectors: list[str] | tuple[str, ...] = DEFAULT_DETECTORS,
                 num_classes: int = 0, steps: int = 0, loss_floor: float = 0.0,
                 dataset: str | None = None, trace: str | Path | None = None,
                 stop_on_alarm: bool = False):
        self.model, self.optimizer = model, optimizer
        self.facts = RunFacts(model_name=type(model).__name__, dataset=dataset,
                              num_classes=int(num_classes), steps=int(steps),
                              loss_floor=float(loss_floor),
                              device=next(model.parameters()).device.type)
        self.names = sealed_detectors(detectors)
        self.trace = Path(trace) if trace is not None else None
        self.stop_on_alarm = stop_on_alarm
        self.rows: list[dict] = []
        self.alarms: list[dict] = []
        self._handles: list = []
        self._pending = False  # a step was taken and waits for its loss
        self._given: tuple | None = None  # a loss (and validation) given before its step
        self._found: torch.Tensor | None = None  # the loop's ``loss`` when the step began
        self._warned = False

    # --------------------------------------------------------------- the context manager
    def __enter__(self) -> LoopWatch:
        self.telemetry = Telemetry(self.model)
        self.watches = [Watch(load_detector(name)) for name in self.names]
        self._seen = {id(w): 0 for w in self.watches}
        self.began = self.step_began = time.perf_counter()
        self.index = 0
        call_all(self.watches, "setup", self.facts)
        self._handles = [self.optimizer.register_step_pre_hook(self._before),
                         self.optimizer.register_step_post_hook(self._after)]
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._pending:
            self._record(self._found)
        call_all(self.watches, "teardown")
        self._report()
        for w in self.watches:
            if w.error:
                log.warning("bugzoo detector %s failed: %s", w.detector.name, w.error)
        if self.trace is not None:
            self.write(self.trace)
        return kind is not None and issubclass(kind, StopTraining)

    # ------------------------------------------------------------------------ each step
    def step(self, loss: torch.Tensor, val_loss: float | None = None,
             val_acc: float | None = None) -> None:
        """The training loss of the step just taken (or, called before ``optimizer.step()``,
        of the step about to be taken), with the validation loss and accuracy when the loop
        evaluated."""
        if self._pending:
            self._record(loss, val_loss, val_acc)
        else:
            self._given = (loss, val_loss, val_acc)

    def _before(self, optimizer, *_) -> None:
        if self._pending:  # the last step's loss was never given: the one the loop held
            self._record(self._found)
        self._found = loss_in(user_frame(sys._getframe(1)))
        self.training = self.model.training
        self.telemetry.measure_gradients()
        self.lr = float(optimizer.param_groups[0]["lr"])

    def _after(self, *_) -> None:
        if self._given is not None:
            given, self._given = self._given, None
            self._record(*given)
        else:
            self._pending = True

    def _record(self, loss: torch.Tensor | None, val_loss: float | None = None,
                val_acc: float | None = None) -> None:
        self._pending = False
        now = time.perf_counter()
        if loss is None:
            if not self._warned:
                log.warning("bugzoo watch: no loss for step %d: pass it with w.step(loss), "
                            "or name it `loss` in the loop; steps without one are not "
                            "watched", self.index)
                self._warned = True
            self.telemetry.measure_update()  # the next update is measured from here
            return
        record = self.telemetry.observe(
            self.index, loss, lr=self.lr, training=self.training,
            step_s=now - self.step_began, data_s=0.0, elapsed_s=now - self.began,
            cuda_mb=(torch.cuda.memory_allocated() / 2**20 if self.facts.device == "cuda"
                     else 0.0),
            scale=None, val_loss=val_loss, val_acc=val_acc)
        self.rows.append(record.row())
        self.index += 1
        self.step_began = now
        call_all(self.watches, "observe", record)
        if self._report() and self.stop_on_alarm:
            raise StopTraining(f"stopped at step {record.step}: {self.alarms[-1]['message']}")

    def _report(self) -> int:
        """Log the alarms raised since the last report; how many there were."""
        fresh = sorted((a for w in self.watches for a in w.alarms[self._seen[id(w)]:]),
                       key=lambda a: a["step"])
        self._seen = {id(w): len(w.alarms) for w in self.watches}
        for alarm in fresh:
            log.warning("bugzoo alarm at step %d from %s: %s (%s; check: %s)", alarm["step"],
                        alarm["detector"], alarm["message"], alarm["symptom"],
                        alarm["category"])
        self.alarms += fresh
        return len(fresh)

    # ------------------------------------------------------------------------ the trace
    def records(self) -> list[Observation]:
        return observations(*trace_tables(self.rows))

    def write(self, folder: Path) -> Path:
        """Write the trace folder: the facts, the records' two tables and the alarms."""
        folder.mkdir(parents=True, exist_ok=True)
        records, layers = trace_tables(self.rows)
        (folder / FACTS_FILE).write_text(json.dumps(
            {"trace_version": TRACE_VERSION, **self.facts.as_dict()}, indent=1) + "\n")
        records.to_parquet(folder / TRACE_FILE, index=False)
        layers.to_parquet(folder / LAYERS_FILE, index=False)
        pd.DataFrame(self.alarms, columns=ALARM_COLUMNS).to_csv(folder / ALARMS_FILE,
                                                                index=False)
        return folder


def watch(model: nn.Module, optimizer: torch.optim.Optimizer, **options) -> LoopWatch:
    """Watch a plain loop's ``optimizer`` (training ``model``) with bugzoo's sealed detectors:
    ``with bugzoo.watch(model, optimizer) as w: ...``. Options: ``detectors`` (names and
    selectors, default the sealed built-ins), the run's facts ``num_classes`` (0 if not a
    classifier), ``steps``, ``loss_floor`` and ``dataset``, ``trace`` (a folder to write the
    trace to at the end) and ``stop_on_alarm``."""
    return LoopWatch(model, optimizer, **options)


# ---------------------------------------------------------------------- a stored trace
def read_trace(folder: Path) -> tuple[RunFacts, list[Observation]]:
    """A trace folder's facts and records (one :func:`watch` wrote, or a bugzoo run's)."""
    folder = Path(folder)
    if (folder / FACTS_FILE).is_file():
        stored = json.loads((folder / FACTS_FILE).read_text())
        version = stored.pop("trace_version", None)
        if version != TRACE_VERSION:
            raise UsageError(f"trace {folder} is of version {version}; this bugzoo reads "
                             f"version {TRACE_VERSION}")
        facts = RunFacts(**stored)
    elif (folder / "summary.json").is_file():
        facts = RunFacts.of(json.loads((folder / "summary.json").read_text()))
    else:
        raise UsageError(f"{folder} is not a trace folder (no {FACTS_FILE} or summary.json)")
    records = pd.read_parquet(folder / TRACE_FILE)
    layers = (pd.read_parquet(folder / LAYERS_FILE) if (folder / LAYERS_FILE).is_file()
              else pd.DataFrame(columns=["step", "layer", "grad_norm"]))
    return facts, observations(records, layers)


def check_trace(folder: Path, detectors: list[str] | tuple[str, ...] = DEFAULT_DETECTORS
                ) -> pd.DataFrame:
    """The alarms (``ALARM_COLUMNS``) the sealed ``detectors`` raise on a stored trace, each
    record shown to them in order as a live watch would."""
    facts, records = read_trace(folder)
    watches = [Watch(load_detector(name)) for name in sealed_detectors(detectors)]
    call_all(watches, "setup", facts)
    for record in records:
        call_all(watches, "observe", record)
    call_all(watches, "teardown")
    for w in watches:
        if w.error:
            log.warning("bugzoo detector %s failed: %s", w.detector.name, w.error)
    alarms = sorted((a for w in watches for a in w.alarms), key=lambda a: a["step"])
    return pd.DataFrame(alarms, columns=ALARM_COLUMNS)
