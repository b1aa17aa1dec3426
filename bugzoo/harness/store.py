"""The results store: one folder per run, written atomically.

Layout: ``<root>/<sweep>/<scenario>/seed<k>/`` holding ``config.yaml``, ``trace.parquet``,
``layer_grad_norms.parquet`` (each step's per-layer gradient norms, the one Observation field
the trace leaves out; runs stored before it have none), ``alarms.parquet`` and
``summary.json``. A run folder is first written under a temporary name
and then renamed, so a reader (or a resumed sweep) sees either a complete run or none.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from bugzoo import cpu_kernels, release, versions
from bugzoo.errors import UsageError
from bugzoo.telemetry import LAYER_COLUMNS, LAYERS

ALARM_COLUMNS = ["detector", "step", "symptom", "category", "message"]
CONTROL_TAG = "control"  # a buggy run's matched control is stored as seed<k>.control/
LAYERS_FILE = f"{LAYERS}.parquet"
CONFIG_FILE = "config.yaml"


def run_dir(root: Path, sweep: str, scenario: str, seed: int) -> Path:
    return Path(root) / sweep / scenario / f"seed{seed}"


def ensure_writable(root: Path) -> Path:
    """Create ``root`` if needed and prove it is writable, else raise a UsageError."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise UsageError(f"results folder {root} is a file: give a folder, new or existing "
                         "(it is made where missing)")
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".probe-"):
            pass
    except OSError as e:
        raise UsageError(f"results folder {root} is not writable ({e.strerror or e})") from None
    return root


def _clean(value):
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_run(final: Path, config: dict, trace: pd.DataFrame, alarms: pd.DataFrame,
              summary: dict, layers: pd.DataFrame | None = None) -> Path:
    """Write one run's files into a temporary sibling folder, then rename it into place
    (``layers``: the per-layer gradient norms, ``telemetry.LAYER_COLUMNS``; none: empty)."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.tmp-"))
    try:
        (tmp / CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=False))
        trace.to_parquet(tmp / "trace.parquet", index=False)
        layers = pd.DataFrame(columns=LAYER_COLUMNS) if layers is None else layers
        layers.reindex(columns=LAYER_COLUMNS).to_parquet(tmp / LAYERS_FILE, index=False)
        alarms.reindex(columns=ALARM_COLUMNS).to_parquet(tmp / "alarms.parquet", index=False)
        (tmp / "summary.json").write_text(json.dumps(_clean(summary), indent=2))
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        move_into_place(tmp, final)  # a deliberate rerun replaces the old run
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def move_into_place(tmp: Path, final: Path) -> None:
    """Rename the finished folder ``tmp`` to ``final``, replacing a folder there: a reader sees
    the old one or the new one, never a mix."""
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)


def is_complete(path: Path) -> bool:
    return (Path(path) / "summary.json").is_file()


def read_summary(path: Path) -> dict:
    return json.loads((Path(path) / "summary.json").read_text())


def read_trace(path: Path) -> pd.DataFrame:
    return pd.read_parquet(Path(path) / "trace.parquet")


def read_layers(path: Path) -> pd.DataFrame | None:
    """A run's per-layer gradient norms, or None for a run stored before they were kept."""
    file = Path(path) / LAYERS_FILE
    return pd.read_parquet(file) if file.is_file() else None


def read_alarms(path: Path) -> pd.DataFrame:
    return pd.read_parquet(Path(path) / "alarms.parquet")


def iter_runs(sweep_dir: Path):
    """Every complete run folder under a sweep folder."""
    for summary in sorted(Path(sweep_dir).glob("*/seed*/summary.json")):
        yield summary.parent


SWEEP_COMMAND = "command.txt"
SPLIT_FILE = "split.json"
SEALED_FILE = "sealed_outcomes.parquet"  # the sealed detectors' outcomes on the sweep's runs


def read_sealed(sweep_dir: Path) -> pd.DataFrame | None:
    path = Path(sweep_dir) / SEALED_FILE
    return pd.read_parquet(path) if path.is_file() else None


def write_sealed(sweep_dir: Path, table: pd.DataFrame) -> None:
    """Replace the sweep's sealed outcomes, atomically."""
    path = Path(sweep_dir) / SEALED_FILE
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    table.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def _sweep_commands(sweep_dir: Path) -> list[tuple[str, str]]:
    """(command, versions) of each line of a sweep's ``command.txt``."""
    path = Path(sweep_dir) / SWEEP_COMMAND
    lines = path.read_text().splitlines() if path.is_file() else []
    return [(command.strip(), made_with.strip())
            for command, _, made_with in (line.partition("  # ") for line in lines)]


def write_sweep_command(sweep_dir: Path, command: str) -> None:
    """Record a command that makes runs of a sweep, with the versions it ran with, so its
    scores can name both. A sweep made by several commands (e.g. a second bench for an opt-in
    detector) keeps each, in order."""
    path = Path(sweep_dir) / SWEEP_COMMAND
    known = _sweep_commands(sweep_dir)
    made_with = f"{versions()} ({cpu_kernels()} CPU kernels); {release.stamp()}"
    if (command, made_with) not in known:
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        lines = [*known, (command, made_with)]
        tmp.write_text("".join(f"{c}  # {v}\n" for c, v in lines))
        os.replace(tmp, path)


def read_sweep_command(sweep_dir: Path) -> str | None:
    """The commands that made a sweep's runs, joined as "`a` then `b`" reads in Markdown."""
    return "` then `".join(dict.fromkeys(c for c, _ in _sweep_commands(sweep_dir))) or None


def read_sweep_versions(sweep_dir: Path) -> str | None:
    """The versions and release the sweep's runs were made with (several joined)."""
    return " | ".join(dict.fromkeys(v for _, v in _sweep_commands(sweep_dir) if v)) or None


def write_split(sweep_dir: Path, split: dict) -> None:
    """Record the split a sweep's runs were drawn for (its name, seeds, data-seed offsets)."""
    path = Path(sweep_dir) / SPLIT_FILE
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(split, indent=1) + "\n")
    os.replace(tmp, path)


SWEEP_TIME = "sweep_time.csv"


def add_sweep_time(sweep_dir: Path, wall_s: float, runs: int, workers: int) -> None:
    """Record one sweeping command's wall time (runs made, overhead timed) in the sweep's
    ``sweep_time.csv``: a sweep resumed after a stop has one row per command."""
    path = Path(sweep_dir) / SWEEP_TIME
    rows = pd.read_csv(path).to_dict("records") if path.is_file() else []
    rows.append({"wall_s": round(wall_s, 1), "runs_made": runs, "workers": workers,
                 "cpus": os.cpu_count()})
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")  # a stop mid-write keeps the old
    pd.DataFrame(rows).to_csv(tmp, index=False)
    os.replace(tmp, path)


def read_split(sweep_dir: Path) -> dict | None:
    path = Path(sweep_dir) / SPLIT_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def sweep_stamp(sweep_dir: Path) -> str | None:
    """What a leaderboard says of the runs it scores: the versions and release they were made
    with, and their split and seeds."""
    made_with = read_sweep_versions(sweep_dir)
    if made_with is None:
        return None
    text = f"Runs made with {made_with}"
    if split := read_split(sweep_dir):
        text += (f"; {split['name']} split, training seeds {', '.join(map(str, split['seeds']))}"
                 + (f", drawn from OS entropy at {split['drawn']}" if split.get("drawn") else ""))
    return text
