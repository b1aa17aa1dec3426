"""Distributed runs: real 2-rank DDP training on gloo, and the two distributed bugs."""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import time
from pathlib import Path

import faults
import pytest
from conftest import quick_cfg
from omegaconf import OmegaConf

from bugzoo.config import resolved
from bugzoo.detector_registry import load_detector
from bugzoo.harness import store
from bugzoo.harness.distributed import _backend, _kill, _rank_process, _wait
from bugzoo.harness.pool import RunTask, parked_workers, run_tasks
from bugzoo.harness.processes import mark_server_copy, rank_context, server_pids, worker_context
from bugzoo.harness.runner import execute
from bugzoo.scenarios import get_scenario
from bugzoo.telemetry import TIMING_COLUMNS

STEPS, ONSET, PG_TIMEOUT_S, RUN_TIMEOUT_S = 40, 10, 3, 90
SHORT = (f"harness.steps={STEPS}", f"harness.dist_timeout_s={PG_TIMEOUT_S}",
         f"harness.timeout_s={RUN_TIMEOUT_S}")


def children_of(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` or one of its fork servers (zombies included), from /proc:
    ranks and pool processes are forked by a server. multiprocessing's long-lived resource
    tracker, the fork servers themselves and the idle pool workers kept for this process's next
    sweep are not counted."""
    kept, found = parked_workers() | server_pids(), []
    parents = {pid} | server_pids()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) in parents:
                cmdline = (entry / "cmdline").read_bytes() if (entry / "cmdline").exists() else b""
                if b"resource_tracker" not in cmdline and int(entry.name) not in kept:
                    found.append(int(entry.name))
    return found


def live_in_group(group: int) -> list[int]:
    """The processes of a process group that have not exited (zombies are left out)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:
            continue
        if int(pgrp) == group and state != "Z":
            found.append(int(stat.parent.name))
    return found


def wait_until(condition, timeout_s: float = 30) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s`` (a loaded machine is slow)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def stuck_rank() -> None:
    """A rank that is stuck, with a process of its own: a session, as a rank has, and a child."""
    os.setsid()
    subprocess.Popen(["sleep", "60"])
    time.sleep(60)


@pytest.fixture(scope="module")
def clean():
    detectors = [load_detector("isfinite_hooks"),  # watches rank 0 only
                 load_detector("rank_consistency")]  # runs on every rank
    return execute(quick_cfg("scenario=mlp-ddp_unsynced", "~bug", *SHORT), detectors)


@pytest.mark.slow
def test_clean_two_ranks_complete_in_sync(clean):
    s = clean.summary
    assert s["outcome"] == "completed", s["rank_errors"]
    assert s["world_size"] == 2 and s["backend"] == "gloo"
    assert s["steps_completed"] == STEPS
    assert s["rank_param_divergence"] == 0.0  # DDP keeps the replicas bitwise equal
    assert s["final_val_acc"] > 0.6
    assert s["scenario"] == "mlp-ddp_unsynced.control"
    status = s["detectors"]["isfinite_hooks"]
    assert status["error"] is None and status["seconds"] > 0
    assert s["detectors"]["rank_consistency"]["error"] is None
    assert clean.alarms.empty  # replicas in sync: the cross-rank checksums agree


@pytest.mark.slow
def test_slow_detector_setup_on_rank_0_is_not_a_hang(tmp_path, monkeypatch):
    # a watcher whose setup on rank 0 (detectors watch rank 0 only) takes longer than the process
    # group's timeout: rank 1 must wait for it, not time out in its first all-reduce
    site = faults.install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", faults.env_with(site)["PYTHONPATH"])  # for the ranks
    slow = importlib.import_module(faults.DIST).SlowStarter(seconds=PG_TIMEOUT_S + 1)
    result = execute(quick_cfg("scenario=mlp-ddp_unsynced", "~bug", *SHORT,
                               "harness.detector_budget_s=60"), [slow])  # no cut-off under load
    assert result.summary["outcome"] == "completed", result.summary.get("rank_errors")
    assert result.summary["steps_completed"] == STEPS
    [status] = result.summary["detectors"].values()
    assert status["error"] is None and status["seconds"] > PG_TIMEOUT_S


@pytest.mark.slow
def test_slow_watcher_on_rank_0_is_waited_for_after_training(tmp_path, monkeypatch):
    # ddp_unsynced ranks never talk while training: rank 1 (unwatched) ends seconds before
    # rank 0 (0.1 s per step in its detector) and must wait for it, not time out
    site = faults.install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", faults.env_with(site)["PYTHONPATH"])  # for the ranks
    laggard = importlib.import_module(faults.DIST).Laggard()
    result = execute(quick_cfg("scenario=mlp-ddp_unsynced", *SHORT), [laggard])
    assert result.summary["outcome"] == "completed", result.summary.get("rank_errors")
    assert result.summary["detectors"]["laggard"]["seconds"] > PG_TIMEOUT_S


def test_rank_skip_hangs_and_is_cleaned_up(clean):
    t0 = time.monotonic()
    result = execute(quick_cfg("scenario=mlp-rank_skip", f"bug.onset={ONSET}", *SHORT))
    wall = time.monotonic() - t0
    s = result.summary
    assert s["outcome"] == "hang" and s["hung"] and not s["crashed"]
    assert wall < RUN_TIMEOUT_S
    assert "timed out" in s["error"].lower()  # ended by the process-group timeout
    assert children_of(os.getpid()) == []
    # before onset, rank 0's trace equals the clean run's
    stable = [c for c in clean.trace.columns if c not in TIMING_COLUMNS]
    before = result.trace[stable].iloc[:ONSET].reset_index(drop=True)
    assert before.equals(clean.trace[stable].iloc[:ONSET].reset_index(drop=True))
    # rank 1 drops its first filtered batch at or after onset: from there rank 0's gradients
    # are averaged with another step's, and its trace leaves the clean one
    after = len(result.trace)
    assert not result.trace[stable].equals(clean.trace[stable].iloc[:after])


def test_ddp_unsynced_ranks_drift_apart(clean):
    result = execute(quick_cfg("scenario=mlp-ddp_unsynced", *SHORT),
                     [load_detector("rank_consistency")])
    s = result.summary
    assert s["outcome"] == "completed", s["rank_errors"]
    assert s["rank_param_divergence"] > 0.1 > clean.summary["rank_param_divergence"]
    # the cross-rank checksum sees it at the first check and names the rank
    [alarm] = result.alarms.to_dict("records")
    assert (alarm["step"], alarm["category"]) == (0, "distributed") and "[1]" in alarm["message"]


@pytest.mark.slow
def test_a_sweeps_one_run_process_forks_its_ranks_and_they_train_as_the_servers_would(tmp_path):
    """In a sweep, a distributed run's own process (a fresh copy of the fork server) forks its
    ranks itself; they train bitwise as ranks forked by the server do."""
    task = RunTask(get_scenario("mlp-ddp_unsynced"), 0, SHORT, (), str(tmp_path), isolate=True,
                   timeout_s=RUN_TIMEOUT_S)
    assert [r["outcome"] for r in run_tasks([task], workers=1)] == ["completed"]
    direct = execute(task.compose()).summary
    assert store.read_summary(task.path)["trace_digest"] == direct["trace_digest"]
    assert children_of(os.getpid()) == []


def start_a_lone_rank(run_dir: Path, server_copy: bool) -> None:
    """Start rank 0 of a 2-rank run whose rank 1 never comes, note its pid, and wait. A sweep's
    one-run process (``server_copy``) forks it itself; any other process asks its server."""
    if server_copy:
        mark_server_copy()
    rank = rank_context().Process(target=_rank_process, args=(run_dir, 0, {}))
    rank.start()
    # written whole or not at all: the test reads the file as soon as it exists
    (run_dir / "rank0.pid.tmp").write_text(str(rank.pid))
    os.replace(run_dir / "rank0.pid.tmp", run_dir / "rank0.pid")
    time.sleep(120)


@pytest.mark.parametrize("server_copy", [False, True], ids=["from-the-server", "forked-here"])
def test_a_rank_ends_when_the_run_that_started_it_is_killed(tmp_path, server_copy):
    cfg = quick_cfg("scenario=mlp-ddp_unsynced", "~bug", "harness.dist_timeout_s=120")
    (tmp_path / "job.pkl").write_bytes(pickle.dumps(
        {"config": resolved(cfg), "world_size": 2, "backend": "gloo", "detectors": [],
         "bug": None, "armed": True}))
    starter = worker_context().Process(target=start_a_lone_rank, args=(tmp_path, server_copy))
    starter.start()
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "rank0.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        rank = int((tmp_path / "rank0.pid").read_text())
        wait_until(lambda: live_in_group(rank) == [rank])  # in its session, waiting for rank 1
    finally:  # a failure above must not leave the starter to the next test's process count
        starter.kill()  # as the OOM killer would
        starter.join()
    deadline = time.monotonic() + 15
    while live_in_group(rank) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_in_group(rank) == [], "a rank outlived the run that started it"


def test_deadline_kills_every_rank_group():
    context = worker_context()
    procs = [context.Process(target=stuck_rank) for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:  # each has made its session and started its child
        wait_until(lambda proc=proc: len(live_in_group(proc.pid)) == 2)
    t0 = time.monotonic()
    assert _wait(procs, time.monotonic() + 0.5) is False
    _kill(procs)
    assert time.monotonic() - t0 < 10
    assert all(p.exitcode == -9 for p in procs)
    assert [live_in_group(p.pid) for p in procs] == [[], []]  # each rank's child went too
    assert children_of(os.getpid()) == []


@pytest.mark.parametrize(("device", "gpus", "expected"), [
    ("auto", 0, "gloo"), ("auto", 1, "gloo"), ("auto", 2, "nccl"), ("cuda", 4, "nccl"),
    ("cpu", 2, "gloo"),
])
def test_backend_is_nccl_only_with_a_gpu_per_rank(monkeypatch, device, gpus, expected):
    """The CUDA path's choice, checked without a GPU: NCCL needs one GPU per rank."""
    monkeypatch.setattr("torch.cuda.is_available", lambda: gpus > 0)
    monkeypatch.setattr("torch.cuda.device_count", lambda: gpus)
    cfg = OmegaConf.create({"harness": {"device": device}})
    assert _backend(cfg, world_size=2) == expected
