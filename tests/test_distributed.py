"""Distributed runs: real 2-rank DDP training on gloo, and the two distributed bugs."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import faults
import pytest
from conftest import quick_cfg
from omegaconf import OmegaConf

from bugzoo.detector_registry import load_detector
from bugzoo.harness.distributed import _backend, _kill, _wait
from bugzoo.harness.pool import parked_workers
from bugzoo.harness.processes import server_pids
from bugzoo.harness.runner import execute
from bugzoo.telemetry import TIMING_COLUMNS

STEPS, ONSET, PG_TIMEOUT_S, RUN_TIMEOUT_S = 40, 10, 3, 90
SHORT = (f"harness.steps={STEPS}", f"harness.dist_timeout_s={PG_TIMEOUT_S}",
         f"harness.timeout_s={RUN_TIMEOUT_S}")


def children_of(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (zombies included), from /proc; multiprocessing's
    long-lived resource tracker and the workers' fork server (started by earlier tests in this
    process) and the idle pool workers kept for this process's next sweep are not counted."""
    kept, found = parked_workers() | server_pids(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                cmdline = (entry / "cmdline").read_bytes() if (entry / "cmdline").exists() else b""
                if b"resource_tracker" not in cmdline and int(entry.name) not in kept:
                    found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def clean():
    detectors = [load_detector("isfinite_hooks"),  # watches rank 0 only
                 load_detector("rank_consistency")]  # runs on every rank
    return execute(quick_cfg("scenario=mlp-ddp_unsynced", "~bug", *SHORT), detectors)


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


def test_deadline_kills_every_rank_group():
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=True) for _ in range(2)]
    t0 = time.monotonic()
    assert _wait(procs, time.monotonic() + 0.5) is False
    _kill(procs)
    assert time.monotonic() - t0 < 10
    assert all(p.returncode == -9 for p in procs)
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
