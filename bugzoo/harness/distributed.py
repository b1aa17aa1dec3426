"""Distributed runs: one scenario trained by several ranks under ``torch.distributed``.

``execute_distributed`` forks one process per rank from the fork server, or from a sweep's
one-run process, itself a fresh copy of the server (:mod:`bugzoo.harness.processes`: torch
already imported either way), each in its own session so a stuck
rank and anything it started can be killed as a group, and each ending itself if the process
that started it dies. Ranks meet on loopback through a file store
and use gloo on CPU (NCCL when there is one GPU per rank). Each rank builds a
:class:`DistributedTrainer`: the clean Trainer with its model wrapped in
``DistributedDataParallel`` and a training loader over the rank's own shard of the data.

Only rank 0 is observed: detectors watch rank 0's run and the trace is rank 0's (a detector
that takes part in collectives, ``all_ranks``, runs on every rank; only rank 0's alarms count).
Every rank saves its final parameters, so the summary carries ``rank_param_divergence``
(relative L2 distance of each rank's parameters from rank 0's; 0 when gradients are
synchronised).

Outcome: ``completed``; ``hang`` when a collective passes the process-group timeout
(``harness.dist_timeout_s``) or the run passes ``harness.timeout_s`` (the ranks are then killed);
``crashed`` for any other error in a rank.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import signal
import sys
import tempfile
import time
from datetime import timedelta
from multiprocessing.process import BaseProcess
from pathlib import Path

import pandas as pd
import torch
import torch.distributed as dist
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from bugzoo.bugs import Bug, get_bug, list_bugs
from bugzoo.config import resolved
from bugzoo.data import BatchLoader
from bugzoo.detector import Detector
from bugzoo.harness import store
from bugzoo.harness.budget import budget_scope
from bugzoo.harness.processes import exit_with_parent, rank_context
from bugzoo.harness.record import DetectorStatus, RunResult, build_summary
from bugzoo.harness.setup_digest import setup_digest
from bugzoo.harness.watch import call_all, observer, run_facts, run_view, watches_for
from bugzoo.telemetry import trace_tables
from bugzoo.train import Trainer, measure

log = logging.getLogger(__name__)

POLL_S = 0.05
TIMEOUT_WORDS = ("timed out", "timeout", "monitoredbarrier")


def world_size_of(cfg: DictConfig, bug: Bug | None) -> int:
    """Ranks a run uses: ``harness.world_size``, at least 2 for bugs that need distribution."""
    size = int(cfg.harness.get("world_size", 1))
    return max(size, 2) if bug is not None and "distributed" in bug.requires else size


def is_distributed(cfg: DictConfig, bug: Bug | None) -> bool:
    return world_size_of(cfg, bug) > 1


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, DistributedDataParallel) else model


class DistributedTrainer(Trainer):
    """The clean Trainer on one rank: DDP-wrapped model, training batches from this rank's shard."""

    def build(self) -> DistributedTrainer:
        super().build()
        self.model = self.wrap_model(self.model)
        return self

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """Wrap in DDP: parameters broadcast from rank 0, gradients averaged in backward."""
        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def build_train_loader(self) -> BatchLoader:
        train = super().build_train_loader()
        rows = torch.arange(self.rank, len(train.split), self.world_size)
        return BatchLoader(train.split.subset(rows), train.batch_size, shuffle=True,
                           seed=self.seed, drop_last=True)


def _flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).float().cpu() for p in unwrap(model).parameters()])


def _is_timeout(error: BaseException) -> bool:
    text = str(error).lower()
    return any(word in text for word in TIMEOUT_WORDS)


def _write_atomic(path: Path, obj) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(obj, f)
    os.replace(tmp, path)


def rank_main(run_dir: Path, rank: int) -> int:
    """Body of one rank's process: train, then write ``rank<r>.pkl`` (and final parameters)."""
    job = pickle.loads((run_dir / "job.pkl").read_bytes())
    cfg = OmegaConf.create(job["config"])
    world_size, backend = job["world_size"], job["backend"]
    cfg.harness.device = f"cuda:{rank}" if backend == "nccl" else "cpu"
    torch.set_num_threads(int(cfg.harness.threads))
    dist.init_process_group(backend, init_method=f"file://{run_dir / 'store'}", rank=rank,
                            world_size=world_size,
                            timeout=timedelta(seconds=float(cfg.harness.dist_timeout_s)))
    # Detectors watch rank 0 only and may make it much slower (a probe training a copy in
    # setup, anomaly mode in every step). Where the ranks wait for each other outside the
    # training collectives (after setup, after training) they wait on this group, as long as a
    # run may last, so rank 0's watchers never turn into a "hang" under the short timeout.
    # monitored_barrier needs gloo, even beside NCCL.
    wait = timedelta(seconds=float(cfg.harness.timeout_s))
    wait_group = dist.new_group(backend="gloo", timeout=wait)
    bug = job["bug"]
    list_bugs()  # every bug module loaded: sys.modules must not single out the planted one
    trainer = DistributedTrainer(cfg, bug, rank=rank, world_size=world_size, armed=job["armed"])
    # rank 0 runs every detector; the others only those that take part in collectives
    mine = [d for d in job["detectors"] if rank == 0 or d.all_ranks]
    watches = watches_for(mine, cfg)
    rows: list[dict] = []
    result: dict = {"rank": rank, "error": None, "timed_out": False, "holdout": None}
    start = time.perf_counter()
    with budget_scope():  # the detectors' calls, each under its time budget
        try:
            trainer.build()
            view = run_view(trainer)
            result["setup_digest"] = setup_digest(view)
            call_all(watches, "setup", view)
            dist.monitored_barrier(group=wait_group, timeout=wait)
            trainer.fit([observer(watches)], rows=rows)
            torch.save(_flat_params(trainer.model), run_dir / f"params{rank}.pt")
            dist.monitored_barrier(group=wait_group, timeout=wait)  # all trained before teardown
            if rank == 0:
                result["holdout"] = measure(unwrap(trainer.model), trainer.data.holdout,
                                            trainer.device)
        except Exception as e:
            result.update(error=f"{type(e).__name__}: {e}", timed_out=_is_timeout(e))
            log.info("rank %d failed: %s", rank, result["error"])
        finally:
            call_all(watches, "teardown")
            wall_s = time.perf_counter() - start
            result.update(
                rows=rows, wall_s=wall_s,
                **run_facts(trainer), device=str(trainer.device),
                alarms=[a for w in watches for a in w.alarms],
                detectors={w.detector.name: w.status(wall_s) for w in watches})
            _write_atomic(run_dir / f"rank{rank}.pkl", result)
    try:
        dist.destroy_process_group()
    except Exception:  # a failed group may refuse to shut down cleanly
        log.debug("destroy_process_group failed on rank %d", rank)
    return 0 if result["error"] is None else 1


def _backend(cfg: DictConfig, world_size: int) -> str:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    wants_gpu = cfg.harness.device != "cpu"
    return "nccl" if wants_gpu and gpus >= world_size else "gloo"


def _rank_process(run_dir: Path, rank: int, environment: dict[str, str]) -> None:
    """Entry of one rank's process, forked from the fork server: a session of its own, the
    run's environment, stdout to nowhere and stderr to its log; then :func:`rank_main`."""
    os.setsid()
    exit_with_parent()  # a rank must not outlive the run that started it
    os.environ.update(environment)
    with open(os.devnull, "wb") as null, open(run_dir / f"rank{rank}.log", "wb") as log_file:
        os.dup2(null.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
    logging.basicConfig(level=logging.INFO)
    sys.exit(rank_main(run_dir, rank))


def _kill(procs: list[BaseProcess]) -> None:
    """Kill each started rank's process group (the rank and anything it started), then reap.
    A rank killed before it made its own group is killed alone."""
    for p in procs:
        if p.pid is not None and p.is_alive():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                p.kill()
    for p in procs:
        if p.pid is not None:
            p.join()


def _wait(procs: list[BaseProcess], deadline: float) -> bool:
    """Wait for every rank to exit; False when the deadline passed first."""
    while any(p.is_alive() for p in procs):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _divergence(params: list[torch.Tensor | None]) -> float:
    """Largest relative L2 distance of a rank's parameters from rank 0's (NaN if any missing)."""
    if any(p is None for p in params) or len(params) < 2:
        return math.nan
    ref = params[0]
    scale = float(torch.linalg.vector_norm(ref)) or 1.0
    return max(float(torch.linalg.vector_norm(p - ref)) / scale for p in params[1:])


def _load(path: Path):
    if not path.exists():
        return None
    if path.suffix == ".pt":
        return torch.load(path)
    return pickle.loads(path.read_bytes())


def execute_distributed(cfg: DictConfig, detectors: list[Detector] = (), bug: Bug | None = None,
                        armed: bool = True) -> RunResult:
    """Run ``cfg`` on several ranks (one process each); never outlives ``harness.timeout_s``.

    ``bug`` (default: ``cfg.bug.id`` looked up) and ``detectors`` are pickled to the ranks;
    ``armed=False`` makes it the buggy run's matched control (:func:`.runner.execute`).
    """
    if bug is None and cfg.get("bug"):
        bug = get_bug(cfg.bug.id)
    world_size = world_size_of(cfg, bug)
    backend = _backend(cfg, world_size)
    environment = {"OMP_NUM_THREADS": str(cfg.harness.threads),
                   "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo")}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bugzoo-dist-") as tmp:
        run_dir = Path(tmp)
        _write_atomic(run_dir / "job.pkl", {"config": resolved(cfg), "world_size": world_size,
                                             "backend": backend, "detectors": list(detectors),
                                             "bug": bug, "armed": armed})
        context = rank_context()
        procs = [context.Process(target=_rank_process, args=(run_dir, rank, environment),
                                 name=f"rank{rank}") for rank in range(world_size)]
        try:
            for proc in procs:
                proc.start()
            finished = _wait(procs, time.monotonic() + float(cfg.harness.timeout_s))
        finally:
            _kill(procs)
        results = [_load(run_dir / f"rank{r}.pkl") for r in range(world_size)]
        params = [_load(run_dir / f"params{r}.pt") for r in range(world_size)]
        logs = [run_dir / f"rank{r}.log" for r in range(world_size)]
        stderr_tails = [path.read_text(errors="replace")[-2000:] if path.exists() else ""
                        for path in logs]
    wall_s = time.perf_counter() - start

    errors = [r["error"] if r else "no result (killed or died)" for r in results]
    if not finished or any(r and r["timed_out"] for r in results):
        outcome = "hang"
    elif any(errors) or any(p.exitcode for p in procs):
        outcome = "crashed"
    else:
        outcome = "completed"
    for rank, (error, tail) in enumerate(zip(errors, stderr_tails, strict=True)):
        if error and tail.strip():
            log.info("rank %d: %s\n%s", rank, error, tail)

    lead = results[0] or {}
    # a rank's own collective timeout says more than a peer's barrier giving up on it
    timeouts = sorted((r["error"] for r in results if r and r["timed_out"]),
                      key=lambda e: "monitoredbarrier" in e.lower())
    first_error = next(iter(timeouts), None) or next((e for e in errors if e), None)
    if not finished:
        first_error = f"run passed harness.timeout_s={cfg.harness.timeout_s}; ranks killed"
    statuses = lead.get("detectors") or {d.name: DetectorStatus(error="rank 0 gave no result")
                                         for d in detectors}
    trace, layers = trace_tables(lead.get("rows", []))
    summary = build_summary(
        cfg, bug, armed=armed, trace=trace, outcome=outcome, error=first_error, wall_s=wall_s,
        detectors=statuses, num_classes=lead.get("num_classes", 2), dataset=lead.get("dataset"),
        loss_floor=lead.get("loss_floor", 0.0), holdout=lead.get("holdout"),
        device=lead.get("device", "cpu"), world_size=world_size, backend=backend,
        rank_errors=errors, rank_param_divergence=_divergence(params),
        setup_digest=lead.get("setup_digest"))
    alarms = pd.DataFrame(lead.get("alarms", []), columns=store.ALARM_COLUMNS)
    return RunResult(resolved(cfg), trace, alarms, summary, layers)
