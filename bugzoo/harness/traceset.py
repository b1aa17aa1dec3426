"""Stored observations read back for replay: a sweep's run folders, or a compact trace set.

A trace set is one folder holding a whole sweep's observations in three Parquet tables, small
enough to commit: ``runs.parquet`` (one row per run: the scalars of its ``summary.json``, what
scoring and a detector's RunView read), ``trace.parquet`` and ``layer_grad_norms.parquet``
(every run's tables, keyed by ``run``), beside ``command.txt`` (the commands that made it).
``bugzoo results traces export <sweep>`` writes one; a float column is kept as float32 only where that
loses nothing.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bugzoo import release
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.harness.honeypot import TAG as HONEYPOT_TAG
from bugzoo.harness.setup_digest import summary_with_setup
from bugzoo.telemetry import Observation, observations

log = logging.getLogger(__name__)

RUNS_FILE, TRACE_FILE = "runs.parquet", "trace.parquet"
TRACESET_FILES = (RUNS_FILE, TRACE_FILE, store.LAYERS_FILE)
DEFAULT_OUT = Path("results/traces")
PARQUET = {"compression": "zstd", "compression_level": 19, "index": False}


@dataclass
class StoredRun:
    """One stored run: its summary's scalars (nested values such as the detectors' statuses
    left out), its trace and its per-layer gradient norms."""

    summary: dict
    trace: pd.DataFrame
    layers: pd.DataFrame

    def observations(self) -> list[Observation]:
        return observations(self.trace, self.layers)


def is_traceset(folder: Path) -> bool:
    return all((Path(folder) / name).is_file() for name in TRACESET_FILES)


def stored_runs(source: Path) -> Iterator[StoredRun]:
    """Every run stored in ``source``, a trace set or a sweep folder (its buggy and clean runs
    and the controls paired with the buggy ones; another tagged run is an exclusive detector's
    second run, left out), checked before the first is read: a folder holding no run, or a run
    without its observations, is a UsageError."""
    source = Path(source)
    if is_traceset(source):
        return _traceset_runs(source)
    paths = _sweep_runs(source)
    return (StoredRun(_scalars(summary_with_setup(p)), store.read_trace(p),
                      store.read_layers(p)) for p in paths)


def _sweep_runs(sweep_dir: Path) -> list[Path]:
    if not sweep_dir.is_dir():
        raise UsageError(f"no sweep folder or trace set {sweep_dir}")
    paths = [p for p in store.iter_runs(sweep_dir)
             if re.fullmatch(rf"seed\d+(\.{HONEYPOT_TAG})?(\.{store.CONTROL_TAG})?", p.name)]
    if not paths:
        raise UsageError(f"{sweep_dir} holds no stored runs: give a sweep folder (runs as "
                         "<scenario>/seed<k>/) or a trace set (" + ", ".join(TRACESET_FILES)
                         + ")")
    bare = [p for p in paths if not all((p / f).is_file()
                                        for f in (TRACE_FILE, store.LAYERS_FILE))]
    if bare:
        raise UsageError(f"{len(bare)} of {len(paths)} runs under {sweep_dir} lack "
                         f"{TRACE_FILE} or {store.LAYERS_FILE} (e.g. {bare[0]}; runs stored "
                         "before per-layer gradient norms were kept): rerun `bugzoo bench`")
    return paths


def _scalars(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if not isinstance(v, dict | list)}


def _traceset_runs(folder: Path) -> Iterator[StoredRun]:
    runs = pd.read_parquet(folder / RUNS_FILE)
    trace = _widened(pd.read_parquet(folder / TRACE_FILE))
    layers = _widened(pd.read_parquet(folder / store.LAYERS_FILE))
    trace_at = np.searchsorted(trace["run"].to_numpy(), np.arange(len(runs) + 1))
    layers_at = np.searchsorted(layers["run"].to_numpy(), np.arange(len(runs) + 1))
    # the run column goes once for the whole table (dropping it from each run's rows cost a
    # copy and a reindex per run)
    trace, layers = trace.drop(columns="run"), layers.drop(columns="run")
    for i, summary in enumerate(runs.to_dict("records")):  # a missing value reads as None
        rows, norms = slice(*trace_at[i:i + 2]), slice(*layers_at[i:i + 2])
        yield StoredRun(summary, trace.iloc[rows].copy(), layers.iloc[norms].copy())


# ----------------------------------------------------------------------------- export
def _narrowed(frame: pd.DataFrame) -> pd.DataFrame:
    """Float columns as float32 where every value survives the round trip (a float32
    measurement stored as float64, e.g. the loss and the norms), integers as small as fits."""
    out = frame.copy()
    for name in out.columns:
        column = out[name]
        if column.dtype == np.float64:
            narrow = column.to_numpy().astype(np.float32)
            if np.array_equal(narrow.astype(np.float64), column.to_numpy(), equal_nan=True):
                out[name] = narrow
        elif column.dtype == np.int64:
            out[name] = pd.to_numeric(column, downcast="integer")
    return out


def _widened(frame: pd.DataFrame) -> pd.DataFrame:
    """A trace-set table as the run stored it: float32 back to float64 (exactly), steps as
    integers (a concatenation may have stored them as floats), layer names as strings."""
    out = frame.astype({c: np.float64 for c in frame.columns if frame[c].dtype == np.float32})
    out = out.astype({"step": np.int64})
    return out.astype({"layer": "str"}) if "layer" in out.columns else out


def unchanged_runs(traces: Path, made: set[str]) -> list[StoredRun]:
    """The runs of the trace set ``traces`` whose scenario is not in ``made`` and whose code is
    unchanged in this checkout (the key it records is its scenario's today): a sweep of the
    changed scenarios, made by the set's own command (split, seeds, detectors) and exported with
    these, is the whole sweep. A carried run keeps its stamp, the release that made it."""
    if not is_traceset(traces):
        raise UsageError(f"{traces} is not a trace set: nothing to keep runs from")
    return [run for run in _traceset_runs(traces)
            if run.summary["scenario"] not in made and run.summary.get("key") is not None
            and run.summary["key"] == release.scenario_key(run.summary["scenario"])]


def _write_table(table: pd.DataFrame, path: Path) -> None:
    """One table of a trace set: floats byte-split (their exponents compress), the rest
    dictionary-encoded."""
    floats = [c for c in table.columns if table[c].dtype.kind == "f"]
    table.to_parquet(path, **PARQUET, use_byte_stream_split=floats,
                     use_dictionary=[c for c in table.columns if c not in floats])


def rewrite_runs(traces: Path, runs: pd.DataFrame) -> None:
    """Replace the run table of the trace set ``traces`` with ``runs`` (the same runs, their
    keys moved), atomically."""
    tmp = traces / f".{RUNS_FILE}.tmp"
    _write_table(runs, tmp)
    tmp.replace(traces / RUNS_FILE)


def _place(run: StoredRun) -> tuple[str, str]:
    """Where a sweep folder stores the run (its folders): a trace set keeps that order."""
    control = f".{store.CONTROL_TAG}" if run.summary.get("role") == "control" else ""
    return run.summary["scenario"], f"seed{run.summary['seed']}{control}"


def export(sweep_dir: Path, out: Path, command: str, keep_unchanged: bool = False) -> Path:
    """Write the trace set of the sweep folder ``sweep_dir`` into ``out`` (replacing a trace
    set there, atomically), recording the sweep's commands and then ``command``. With
    ``keep_unchanged``, the runs of the set at ``out`` that :func:`unchanged_runs` keeps join
    the sweep's, and the commands that made them come first."""
    sweep_dir, out = Path(sweep_dir), Path(out)
    if is_traceset(sweep_dir):
        raise UsageError(f"{sweep_dir} is a trace set already; export reads a sweep folder")
    if out.exists() and any(out.iterdir()) and not is_traceset(out):
        raise UsageError(f"{out} exists and is not a trace set: refusing to replace it")
    fresh = [StoredRun({**run.summary, "key": release.scenario_key(run.summary["scenario"])},
                       run.trace, run.layers) for run in stored_runs(sweep_dir)]
    kept = unchanged_runs(out, {run.summary["scenario"] for run in fresh}) if (
        keep_unchanged) else []
    ordered = sorted([*kept, *fresh], key=_place)
    runs, traces, layers = [], [], []
    for i, run in enumerate(ordered):
        runs.append(run.summary)
        traces.append(run.trace.assign(run=i))
        layers.append(run.layers.assign(run=i))
    trace = pd.concat(traces, ignore_index=True)
    if "scale" in trace.columns:  # None without a GradScaler; read back as such
        trace["scale"] = pd.to_numeric(trace["scale"])
    summaries = pd.DataFrame(runs)
    # an event's symptom is a bool in a summary and a number in the set (as in the outcomes
    # table): read back, kept runs hold 1.0 and 0.0, which a fresh run's True must join
    summaries["symptom_value"] = pd.to_numeric(summaries["symptom_value"])
    tables = {RUNS_FILE: summaries.convert_dtypes(),  # ints stay ints beside None
              TRACE_FILE: _narrowed(trace[["run", *trace.columns.drop("run")]]),
              store.LAYERS_FILE: _narrowed(pd.concat(layers, ignore_index=True)[
                  ["run", "step", "layer", "grad_norm"]].astype({"layer": "category"}))}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        for name, table in tables.items():
            _write_table(table, tmp / name)
        earlier = [out / store.SWEEP_COMMAND] if kept else []
        lines = [line for path in [*earlier, sweep_dir / store.SWEEP_COMMAND] if path.is_file()
                 for line in path.read_text().splitlines(keepends=True)]
        (tmp / store.SWEEP_COMMAND).write_text("".join(dict.fromkeys(lines)))
        store.write_sweep_command(tmp, command)
        store.move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in Path(folder).iterdir() if f.is_file()) / 2**20


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results traces",
                       description="Trace sets: a sweep's observations, compact enough to "
                       "commit, for `bugzoo replay`.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    export_p = sub.add_parser("export", help="write the trace set of a sweep folder")
    export_p.add_argument("sweep_dir", help="a sweep folder, e.g. results/runs/bench")
    export_p.add_argument("--out", default=str(DEFAULT_OUT),
                          help=f"the trace set folder (default: {DEFAULT_OUT})")
    export_p.add_argument("--keep-unchanged", action="store_true",
                          help="keep the runs of the trace set at --out whose scenario the "
                          "sweep lacks and whose code is unchanged (a sweep of the changed "
                          "scenarios then completes the set)")
    args = p.parse_args(argv)
    command = f"bugzoo results traces export {args.sweep_dir}" + (
        f" --out {args.out}" if Path(args.out) != DEFAULT_OUT else "") + (
        " --keep-unchanged" if args.keep_unchanged else "")
    out = export(Path(args.sweep_dir), Path(args.out), command, args.keep_unchanged)
    log.info("trace set of %d runs, %.1f MB -> %s", len(pd.read_parquet(out / RUNS_FILE)),
             size_mb(out), out)
    return 0
