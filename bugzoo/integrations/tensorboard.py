"""``bugzoo tensorboard``: stored runs as TensorBoard logs, so the symptom curves show in the
tool a user already watches. Each run's trace columns become scalars (``trace/<column>``), its
per-layer gradient norms ``layer_grad_norm/<parameter>``, and each alarm a text entry
(``alarms/<detector>``) at its step. The run folders are only read. Needs the ``tensorboard``
extra."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.integrations.live import missing_extra
from bugzoo.telemetry import LAYER_COLUMNS, observations

log = logging.getLogger(__name__)

DEFAULT_LOGDIR = Path("results/runs/tensorboard")
EVENTS = "events.out.tfevents.*"


def run_folders(source: Path) -> list[Path]:
    """The run folder ``source``, or every complete run in the sweep folder ``source``."""
    if store.is_complete(source):
        return [source]
    runs = list(store.iter_runs(source)) if source.is_dir() else []
    if not runs:
        raise UsageError(f"{source} is neither a run folder (with summary.json) nor a sweep "
                         "folder of runs (<scenario>/seed<k>/summary.json)")
    return runs


def write_events(run: Path, logdir: Path) -> Path:
    """Write the run stored at ``run`` as event files into ``logdir`` (replacing the ones a
    previous export left there); return ``logdir``."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # optional: the tensorboard extra
    except ImportError:
        raise UsageError(missing_extra("tensorboard", "tensorboard")) from None
    logdir.mkdir(parents=True, exist_ok=True)
    for old in logdir.glob(EVENTS):
        old.unlink()
    layers = store.read_layers(run)
    steps = observations(store.read_trace(run),
                         pd.DataFrame(columns=LAYER_COLUMNS) if layers is None else layers)
    with SummaryWriter(log_dir=str(logdir)) as writer:
        for obs in steps:  # a value a step does not have (no evaluation, no scaler) is left out
            for name, value in vars(obs).items():
                if name != "step" and isinstance(value, int | float):
                    writer.add_scalar(f"trace/{name}", float(value), obs.step)
            for layer, norm in obs.layer_grad_norms.items():
                writer.add_scalar(f"layer_grad_norm/{layer}", norm, obs.step)
        for a in store.read_alarms(run).itertuples(index=False):
            writer.add_text(f"alarms/{a.detector}", f"**{a.symptom}** ({a.category}): "
                            f"{a.message}", int(a.step))
    return logdir


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo tensorboard",
                       description="Write stored runs as TensorBoard logs: the trace as "
                       "scalars, the alarms as text. Then: tensorboard --logdir LOGDIR")
    p.add_argument("source", help="a run folder or a sweep folder, e.g. results/runs/bench")
    p.add_argument("--logdir", default=str(DEFAULT_LOGDIR),
                   help=f"where the logs go, one folder per run (default: {DEFAULT_LOGDIR})")
    args = p.parse_args(argv)
    source, logdir = Path(args.source), Path(args.logdir)
    runs = run_folders(source)
    base = source.parent.parent.parent if runs == [source] else source.parent
    for run in runs:
        write_events(run, logdir / run.relative_to(base))
    log.info("%d runs -> %s (view with: tensorboard --logdir %s)", len(runs), logdir, logdir)
    return 0
