"""The trace a watched run writes, made as the run goes and streamed to sealed detectors.

:class:`TraceRecorder` is what every watch outside bugzoo's harness shares: the plain loop's
(:mod:`~bugzoo.integrations.loop`), and the Lightning and Hugging Face callbacks that write a
trace (:mod:`~bugzoo.integrations.lightning`, :mod:`~bugzoo.integrations.huggingface`). Its
caller says when the step's gradients are on the parameters (:meth:`TraceRecorder.before_step`)
and when the step's loss is known (:meth:`TraceRecorder.record`); each step becomes one record
of the bugzoo trace (:mod:`bugzoo.trace`), shown to the detectors at once, and each alarm is
logged once. The trace folder (``facts.json``, ``trace.parquet``, ``layer_grad_norms.parquet``,
``alarms.csv``) is what ``bugzoo check-trace`` rescores (:func:`check_trace`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

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


class TraceRecorder:
    """One run's trace, step by step, shown to sealed ``detectors`` as it is made."""

    def __init__(self, model: nn.Module, facts: RunFacts,
                 detectors: list[str] | tuple[str, ...] = DEFAULT_DETECTORS):
        self.model, self.facts = model, facts
        self.names = sealed_detectors(detectors)
        self.rows: list[dict] = []
        self.alarms: list[dict] = []
        self.index = 0

    def begin(self) -> None:
        """Load the detectors and show them the run's facts; call once, before the first step."""
        self.telemetry = Telemetry(self.model)
        self.watches = [Watch(load_detector(name)) for name in self.names]
        self._seen = {id(w): 0 for w in self.watches}
        self.began = self.step_began = time.perf_counter()
        call_all(self.watches, "setup", self.facts)

    def before_step(self, optimizer: torch.optim.Optimizer, training: bool) -> None:
        """The step's gradients are on the parameters and ``optimizer`` is about to step."""
        self.training = training
        self.telemetry.measure_gradients()
        self.lr = float(optimizer.param_groups[0]["lr"])

    def record(self, loss: torch.Tensor, val_loss: float | None = None,
               val_acc: float | None = None, scale: float | None = None) -> int:
        """The step just taken, with its training ``loss`` (and the validation loss and accuracy
        when the run evaluated, the loss scale under mixed precision): one record, shown to the
        detectors; how many alarms they raised on it."""
        now = time.perf_counter()
        record = self.telemetry.observe(
            self.index, loss, lr=self.lr, training=self.training,
            step_s=now - self.step_began, data_s=0.0, elapsed_s=now - self.began,
            cuda_mb=(torch.cuda.memory_allocated() / 2**20 if self.facts.device == "cuda"
                     else 0.0),
            scale=scale, val_loss=val_loss, val_acc=val_acc)
        self.rows.append(record.row())
        self.index += 1
        self.step_began = now
        call_all(self.watches, "observe", record)
        return self.report()

    def skip(self) -> None:
        """The step just taken has no loss to record: the next update is measured from here."""
        self.telemetry.measure_update()

    def finish(self, trace: Path | None = None) -> None:
        """The run ended: the detectors' last word, their failures logged, the trace written
        to the folder ``trace`` when given."""
        call_all(self.watches, "teardown")
        self.report()
        for w in self.watches:
            if w.error:
                log.warning("bugzoo detector %s failed: %s", w.detector.name, w.error)
        if trace is not None:
            self.write(Path(trace))

    def report(self) -> int:
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
