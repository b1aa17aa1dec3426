"""A sweep's plan run through a Hydra launcher: ``bugzoo bench --launcher NAME``.

The bench plans its runs as always (controls, healthy variants, seeds, split, detectors). Here
the runs not stored yet are cut into ``jobs`` shares of about equal expected cost, and each
share becomes one job of a Hydra multirun of the small application below. The job runs its
share with the sweep's own worker pool (:func:`~bugzoo.harness.pool.run_tasks`), so a hang or a
crash is recorded exactly as on one machine. Every job writes its run folders into the one sweep
folder, so the results merge by construction; a run whose job died is simply not stored, and
the same command run again makes only what is missing.

One job per share, not per run: a job pays an interpreter start and the torch import, and on a
cluster a scheduler slot, which a share of many runs pays once. The plan travels to the jobs as a
pickle in ``<sweep>/.launch/``, beside Hydra's and submitit's logs.
"""

from __future__ import annotations

import logging
import math
import pickle
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import hydra
from hydra import compose, initialize
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import MISSING, DictConfig, OmegaConf
from tqdm import tqdm

from bugzoo.errors import UsageError, unknown_choice
from bugzoo.harness import store
from bugzoo.harness.pool import RunTask, run_tasks

log = logging.getLogger(__name__)

LAUNCH_DIR = ".launch"  # in the sweep folder: the plans, and Hydra's and submitit's job logs
JOB_CONFIG = "bugzoo_bench_job"
EXPECTED_MARGIN = 3  # a submitit job's time limit: this many times its runs' expected time,
SLACK_MIN = 10  # plus the timeouts of its isolated runs, plus this many minutes


@dataclass
class BenchJob:
    """One launcher job: the plan file, which share of it, and the workers that run it."""

    plan: str = MISSING
    job: int = 0
    workers: int = 1
    echo: bool = True  # print a line per run stored (into the job's log)


ConfigStore.instance().store(name=JOB_CONFIG, node=BenchJob)


def check_launcher(name: str, overrides: list[str]) -> None:
    """Refuse a launcher not installed here (the ``hydra/launcher`` choices, plug-ins
    included), or ``hydra.*`` overrides it cannot take, in one line."""
    GlobalHydra.instance().clear()
    try:
        with initialize(version_base="1.3", config_path=None):
            choices = GlobalHydra.instance().config_loader().get_group_options("hydra/launcher")
            if name not in choices:
                raise unknown_choice("launcher", name, choices)
            compose(JOB_CONFIG, overrides=[f"hydra/launcher={name}", *overrides],
                    return_hydra_config=True)
    except HydraException as e:
        first = str(e).strip().splitlines()[0]
        raise UsageError(f"launcher {name} cannot take {' '.join(overrides)}: {first}") from None


def shares(tasks: list[RunTask], jobs: int) -> list[list[RunTask]]:
    """``tasks`` cut into at most ``jobs`` shares of about equal expected cost (longest first,
    each to the lightest share so far); no share is empty."""
    cut: list[list[RunTask]] = [[] for _ in range(min(jobs, len(tasks)))]
    load = [0.0] * len(cut)
    for task in sorted(tasks, key=lambda t: t.expected_cost, reverse=True):
        lightest = load.index(min(load))
        cut[lightest].append(task)
        load[lightest] += task.expected_cost
    return cut


def launch(tasks: list[RunTask], out: Path, launcher: str, overrides: list[str], jobs: int,
           workers: int, progress: bool = True) -> Counter:
    """Run ``tasks`` as ``jobs`` jobs of ``launcher``, each on ``workers`` workers, and wait
    for them, with a progress bar of the runs stored; returns a count of the outcomes stored
    now (runs a failed job did not store are missing from it, and from the sweep folder)."""
    cut = shares(tasks, jobs)
    if not cut:
        return Counter()
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    folder = out.resolve() / LAUNCH_DIR / stamp
    folder.mkdir(parents=True)
    plan = folder / "plan.pkl"
    plan.write_bytes(pickle.dumps(cut))
    log.info("launching %d runs as %d %s jobs of %d workers each (logs: %s)", len(tasks),
             len(cut), launcher, workers, folder)
    # the basic launcher runs its jobs in this process, whose logging stays as it is, and
    # whose output the progress bar is
    here = launcher == "basic"
    argv = ["-m", f"plan={plan}", f"job=range(0,{len(cut)})", f"workers={workers}",
            f"echo={not (here and progress)}",
            f"hydra/launcher={launcher}", f"hydra.sweep.dir={folder}",
            f"hydra/job_logging={'none' if here else 'stdout'}", "hydra/hydra_logging=none",
            *_time_limit(launcher, overrides, cut, workers), *overrides]
    saved = sys.argv
    sys.argv = ["bugzoo bench", *argv]
    plugins = logging.getLogger("hydra_plugins")  # their job listing: in the logs folder too
    level = plugins.level
    plugins.setLevel(logging.WARNING)
    try:
        with stored_progress(tasks, progress):
            _job_entry()
    except SystemExit as e:  # Hydra's report of a job that failed (printed above it)
        if e.code:
            log.error("%s reported a failed job; the runs it did not store are missing",
                      launcher)
    finally:
        sys.argv = saved
        plugins.setLevel(level)
    return Counter(store.read_summary(t.path)["outcome"] for t in tasks
                   if store.is_complete(t.path))


@contextmanager
def stored_progress(tasks: list[RunTask], enabled: bool, every_s: float = 2.0
                    ) -> Iterator[None]:
    """A progress bar of the runs stored so far, read from the sweep folder every ``every_s``
    seconds while the launcher's jobs make them, wherever those run."""
    if not enabled:
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        pending = list(tasks)
        with tqdm(total=len(tasks), unit="run", dynamic_ncols=True) as bar:
            while True:
                last = stop.is_set()  # the jobs are over: one more look, then done
                before, pending = len(pending), [t for t in pending
                                                 if not store.is_complete(t.path)]
                bar.update(before - len(pending))
                if last or not pending:
                    return
                stop.wait(every_s)

    thread = threading.Thread(target=watch, name="launch-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _time_limit(launcher: str, overrides: list[str], cut: list[list[RunTask]],
                workers: int) -> list[str]:
    """A submitit job's time limit, unless one is given: for the heaviest share, three times
    its runs' expected time plus the whole timeout of each isolated run in it (one may hang),
    over its workers, plus some slack. A job cut short leaves its runs to the next bench;
    submitit's own default, an hour, would cut most long shares, and a worst case of every run
    hanging would be more than a cluster grants."""
    if not launcher.startswith("submitit") or any(
            o.startswith("hydra.launcher.timeout_min=") for o in overrides):
        return []
    seconds = max((EXPECTED_MARGIN * sum(t.expected_cost for t in share)
                   + sum(t.timeout_s for t in share if t.isolate)) / workers for share in cut)
    return [f"hydra.launcher.timeout_min={math.ceil(seconds / 60) + SLACK_MIN}"]


@hydra.main(config_path=None, config_name=JOB_CONFIG, version_base="1.3")
def _job_entry(cfg: DictConfig) -> None:
    """One job: run its share of the plan on the sweep's pool, printing each run's outcome."""
    job = OmegaConf.to_object(cfg)
    share = pickle.loads(Path(job.plan).read_bytes())[job.job]
    try:
        for record in run_tasks(share, job.workers):
            if job.echo:
                print(f"{record['scenario']} {Path(record['path']).name}: "
                      f"{record['outcome']}", flush=True)
    except Exception:  # the runs it did not store stay missing; a rerun makes them
        log.exception("job %d of %s stopped", job.job, job.plan)
