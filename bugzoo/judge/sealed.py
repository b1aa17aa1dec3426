"""Sealed scoring: each stored run's trace streamed to sealed detectors outside any training
process, in a confined process of its own, in an order drawn with :mod:`secrets`.

The judge keeps everything that names a run (its scenario, seed, role) and sends a confined
zygote (:mod:`bugzoo.judge.sealed_zygote`) only the run's facts and records. A detector there
sees no trainer, no configuration, no other run and no writable shared file system, and the
folder of stored runs is hidden from it, so whatever it scores it scores from the trace. Where
this machine allows no confinement (:func:`bugzoo.harness.sandbox.confinement`) the same
protocol runs unconfined and every row says so.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from bugzoo.bugs.base import CATEGORIES
from bugzoo.detector import is_sealed, live_reason
from bugzoo.detector_registry import DETECTORS, SELECTORS, detector_class, select_detectors
from bugzoo.errors import UsageError
from bugzoo.harness import sandbox, store
from bugzoo.harness.record import DetectorStatus
from bugzoo.harness.sandbox import read_message, write_message
from bugzoo.harness.traceset import StoredRun, is_traceset, stored_runs
from bugzoo.judge.outcomes import judge_run, sealed_label
from bugzoo.telemetry import LAYER_COLUMNS, LAYERS
from bugzoo.trace import RECORD_FIELDS, RunFacts

log = logging.getLogger(__name__)

BUDGET_S = 10.0  # per detector call, as a live run's harness.detector_budget_s default
LIMITS = {"wall_s": 300.0, "cpu_s": 300, "memory_bytes": 8 << 30}  # per job
STORED_RUNS = Path("results/runs")  # hidden as well as the scored folder: other sweeps' runs
SYMPTOM_CHARS, MESSAGE_CHARS = 80, 500
WORKERS = min(2, os.cpu_count() or 1)


def sealed_selection(words: list[str] | None) -> list[str]:
    """The detectors ``words`` select (as ``--detectors`` reads them) that are sealed. One a
    selector brings in that is not is left out, logged; one named is a UsageError."""
    named = {w for arg in words or () for w in arg.split(",")} - set(SELECTORS)
    chosen, left_out = [], []
    for name in select_detectors(words):
        if is_sealed(detector_class(name)):
            chosen.append(name)
        elif name in named:
            reason = live_reason(detector_class(name)) or "it may read the live run"
            raise UsageError(
                f"detector {name} cannot be replayed: it is not sealed ({reason}), and a "
                f"stored run holds only its trace; score it with a live `bugzoo bench "
                f"--detectors {name}`")
        else:
            left_out.append(name)
    if left_out:
        log.warning("not replayed, since they read the live run and not only its trace "
                    "(score them with a live `bugzoo bench`): %s", ", ".join(left_out))
    if not chosen:
        raise UsageError("no detector to replay: none selected is sealed")
    return chosen


class Zygote:
    """A confined zygote process serving jobs one at a time, in lockstep: the next job is sent
    only once the last is answered, so nothing waits in its pipe for a job to read."""

    def __init__(self, hidden: list[Path]):
        self.confinement = sandbox.confinement()
        self.private_tmp = Path(tempfile.mkdtemp(prefix="bugzoo-sealed-"))
        self.process = subprocess.Popen(
            sandbox.confined_command([sys.executable, "-m", "bugzoo.judge.sealed_zygote"]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        write_message(self.process.stdin, pickle.dumps({
            "hidden": [str(Path(p).resolve()) for p in hidden if Path(p).exists()],
            "private_tmp": str(self.private_tmp), "limits": LIMITS,
            "confinement": self.confinement}))
        ready = self._reply()
        if ready.get("ready") != self.confinement:
            raise sandbox.SandboxError(f"the sealed zygote did not start: {ready}")
        self.jobs = 0

    def _reply(self) -> dict:
        body = read_message(self.process.stdout)
        if body is None:
            raise sandbox.SandboxError(f"the sealed zygote ended (status {self.process.wait()})")
        return json.loads(body)

    def score(self, facts: RunFacts, records: tuple[pd.DataFrame, pd.DataFrame],
              detectors: list[str]) -> dict:
        """Score one run's trace (its facts, and its records as the two tables of
        :func:`records_of`) with ``detectors``; the job's reply."""
        self.jobs += 1
        write_message(self.process.stdin, pickle.dumps({
            "job": self.jobs, "facts": facts.as_dict(), "records": records,
            "detectors": detectors, "budget_s": BUDGET_S}))
        reply = self._reply()
        if reply.get("job") != self.jobs:
            raise sandbox.SandboxError(f"the sealed zygote answered job {reply.get('job')} "
                                       f"for job {self.jobs}")
        return reply

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.private_tmp.rmdir()

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            self.process.kill()
        self.close()


def secret_folders(source: Path) -> list[Path]:
    """What a sealed detector must not read while ``source`` is scored: ``source`` itself
    unless it is public (a trace set, or a sweep of the dev split), and every stored sweep under
    ``results/runs`` (always hidden, see :data:`STORED_RUNS`)."""
    split = store.read_split(source) if Path(source).is_dir() else None
    public = is_traceset(source) or (split is not None and split.get("name") == "dev")
    return [] if public else [Path(source)]


def plug_in_groups(names: list[str]) -> list[list[str]]:
    """``names`` grouped by the distribution that provides them: detectors of one package
    share a job's process; those of different packages never do, so one cannot reach another."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(DETECTORS.provider(name)[0], []).append(name)
    return list(groups.values())


RECORD_COLUMNS = [name for name in RECORD_FIELDS if name != LAYERS]


def records_of(run: StoredRun) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's records as the trace schema's two tables, and nothing else a stored trace may
    hold: the scalar fields per step, and the per-layer gradient norms. The job's process turns
    them into records (:func:`bugzoo.telemetry.observations`), in parallel with the others."""
    return (run.trace[[c for c in RECORD_COLUMNS if c in run.trace]].copy(),
            run.layers[LAYER_COLUMNS].copy())


def checked_alarms(reply: dict, names: list[str], steps: int) -> pd.DataFrame:
    """The reply's alarms that a detector of ``names`` could have raised on a run of ``steps``
    records, their text cut to length; anything else is dropped."""
    rows = []
    for a in reply.get("alarms") or []:
        try:
            step, detector = int(a["step"]), str(a["detector"])
        except (KeyError, TypeError, ValueError):
            continue
        if detector in names and 0 <= step < max(steps, 1):
            category = str(a.get("category"))
            rows.append({"detector": detector, "step": step,
                         "symptom": str(a.get("symptom"))[:SYMPTOM_CHARS],
                         "category": category if category in CATEGORIES else "unknown",
                         "message": str(a.get("message"))[:MESSAGE_CHARS]})
    return pd.DataFrame(rows, columns=store.ALARM_COLUMNS)


def statuses_of(reply: dict, names: list[str], confinement: str) -> dict[str, dict]:
    """Each detector's status from the reply; one the reply lacks failed, with the reason."""
    found = reply.get("statuses") or {}
    failed = {**(reply.get("failed") or {})}
    out = {}
    for name in names:
        status = found.get(name) if isinstance(found.get(name), dict) else None
        if status is None:
            distribution, version = DETECTORS.provider(name)
            cls = detector_class(name)
            status = DetectorStatus(
                error=failed.get(name) or reply.get("error") or "no status returned",
                role=cls.role, scope=cls.scope, distribution=distribution,
                version=version).as_dict()
        out[name] = {**status, "scored": sealed_label(confinement)}
    return out


def score_runs(runs: list[StoredRun], names: list[str], hidden: list[Path],
               progress: bool = False, workers: int = WORKERS
               ) -> list[tuple[pd.DataFrame, dict[str, dict]]]:
    """The alarms (``store.ALARM_COLUMNS``) and statuses of the sealed detectors ``names`` on
    each of ``runs``, in their order: every run's trace shown to each plug-in package's
    detectors in a confined job of its own, the runs scored in an order drawn with
    :mod:`secrets`, ``hidden`` folders covered, ``workers`` zygotes sharing the runs."""
    order = list(range(len(runs)))
    secrets.SystemRandom().shuffle(order)
    groups = plug_in_groups(names)
    if sandbox.confinement() != sandbox.NAMESPACES:
        log.warning("no confinement on this machine (user namespaces are not allowed): "
                    "sealed detectors run unconfined, and the rows say so")
    bar = tqdm(total=len(runs), unit="run", desc="sealed scoring", disable=not progress)
    found: dict[int, tuple[pd.DataFrame, dict[str, dict]]] = {}

    def serve(share: list[int]) -> None:
        with Zygote([*hidden, STORED_RUNS]) as zygote:
            for i in share:
                found[i] = score_run(zygote, runs[i], groups)
                bar.update()

    workers = max(1, min(workers, len(runs)))
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(serve, [order[k::workers] for k in range(workers)]))
    bar.close()
    return [found[i] for i in range(len(runs))]


def score_run(zygote: Zygote, run: StoredRun, groups: list[list[str]]
              ) -> tuple[pd.DataFrame, dict[str, dict]]:
    """One run's alarms and statuses: its trace shown to each group in a job of its own."""
    facts, records = RunFacts.of(run.summary), records_of(run)
    alarms, statuses = [], {}
    for group in groups:
        reply = zygote.score(facts, records, group)
        alarms.append(checked_alarms(reply, group, len(records[0])))
        statuses.update(statuses_of(reply, group, zygote.confinement))
    return pd.concat([a for a in alarms if len(a)] or alarms[:1], ignore_index=True), statuses


def sealed_outcomes(runs: Iterable[StoredRun], names: list[str], hidden: list[Path],
                    progress: bool = False, workers: int = WORKERS) -> pd.DataFrame:
    """Per (detector, run) outcomes of the sealed detectors ``names`` on ``runs``, scored as
    :func:`score_runs` does."""
    runs = list(runs)
    rows = []
    for run, (alarms, statuses) in zip(runs, score_runs(runs, names, hidden, progress, workers),
                                       strict=True):
        elapsed = (run.trace.set_index("step")["elapsed_s"] if len(run.trace)
                   else pd.Series(dtype=float))
        rows += judge_run({**run.summary, "detectors": statuses}, alarms, elapsed)
    return pd.DataFrame(rows)


def score_sweep_sealed(sweep_dir: Path, names: list[str], progress: bool = True) -> pd.DataFrame:
    """Score the sealed detectors ``names`` on every stored run of ``sweep_dir``, training
    nothing; their rows replace any earlier rows of theirs in the sweep's
    ``sealed_outcomes.parquet``, which scoring reads beside the live rows. Returns the new rows."""
    sweep_dir = Path(sweep_dir)
    table = sealed_outcomes(stored_runs(sweep_dir), names, secret_folders(sweep_dir), progress)
    earlier = store.read_sealed(sweep_dir)
    if earlier is not None:
        earlier = earlier[~earlier["detector"].isin(names)]
        table = pd.concat([earlier, table], ignore_index=True) if len(earlier) else table
    store.write_sealed(sweep_dir, table)
    return table
