"""Reliability of the sweep harness: injected faults, kill -9 and resume, determinism.

Figures quoted in README (Reliability) come from these tests: the fault sweep injects
FAULT_CASES cases, the crash test kills the sweep KILLS times and resumes each time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import forkserver
from pathlib import Path

import faults
import pandas as pd
import pytest
from conftest import quick_cfg

from bugzoo import cpu_model, release
from bugzoo.config import compose_run
from bugzoo.harness import processes, store
from bugzoo.harness.pool import RunTask, parked_workers, run_task, run_tasks
from bugzoo.harness.processes import server_pids
from bugzoo.harness.runner import execute
from bugzoo.harness.sweep import is_done, plan_runs, resume_state, select_scenarios, sweep
from bugzoo.judge.scoring import score_sweep
from bugzoo.judge.sealed import score_sweep_sealed
from bugzoo.scenarios import get_scenario
from bugzoo.telemetry import TIMING_COLUMNS

SHORT = ("harness.steps=20", "harness.eval_interval=10")
FAULT_CASES = 7  # raising run, NaN run, hung run, memory-capped run, 3 faulty detectors
KILLS = 2


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    """The fault detectors, installed as an ordinary plug-in distribution on sys.path."""
    site = faults.install(tmp_path_factory.mktemp("site"))
    sys.path.insert(0, str(site))
    yield site
    sys.path.remove(str(site))


def _reference(scenario: str, seed: int, *overrides: str) -> dict:
    cfg = compose_run([f"scenario={scenario}", f"seed={seed}", *overrides])
    return execute(cfg).summary


def _others(before: set[int]) -> list[tuple[int, str]]:
    """Processes below this one that were not there before, bar multiprocessing's resource
    tracker and the workers' fork server (one helper each per parent process, by design alive
    until the parent exits) and the idle workers the pool keeps for the next sweep."""
    kept = parked_workers() | server_pids()
    return [(pid, cmd) for pid, cmd in faults.descendants()
            if pid not in before | kept and "resource_tracker" not in cmd]


@pytest.mark.slow
def test_fault_injected_sweep_completes_and_isolates_each_fault(plugins, tmp_path):
    out = str(tmp_path)
    budget = "harness.detector_budget_s=0.5"
    tasks = [
        # a clean run watched by a raising and a hanging detector next to a sound one
        RunTask(get_scenario("mlp-clean"), 0, (*SHORT, budget), ("boom", "stall", "nonfinite"), out,
                isolate=False, timeout_s=120),
        # a detector that changes the model it watches
        RunTask(get_scenario("mlp-clean"), 1, SHORT, ("meddler", "nonfinite"), out, False, 120),
        # loss goes NaN
        RunTask(get_scenario("mlp-lr_too_high"), 0, SHORT, ("nonfinite",), out, False, 120),
        # a real leak (loss tensors kept with their graphs) against a 64 MiB address-space cap
        RunTask(get_scenario("mlp-loss_tensor_kept"), 0, ("harness.steps=3000", "harness.eval_interval=1000",
                                            "harness.batch_size=2048",
                                            "harness.memory_limit_mb=64"),
                ("nonfinite",), out, False, 120),
        # raises inside autograd (bench isolates loud bugs; pooled here, saving a process start)
        RunTask(get_scenario("mlp-inplace_op_autograd"), 0, SHORT, ("nonfinite",), out, False, 120),
        # runs far past its timeout, in its own process
        RunTask(get_scenario("mlp-clean"), 2, ("harness.steps=1000000", "harness.eval_interval=1000"),
                ("nonfinite",), out, True, 3),
    ]
    before = {pid for pid, _ in faults.descendants()}
    t0 = time.monotonic()
    counts = sweep(tasks, workers=2, progress=False)
    assert time.monotonic() - t0 < 240  # no run waited out more than its own timeout
    assert sum(counts.values()) == len(tasks)
    assert counts == {"completed": 3, "crashed": 2, "hang": 1}, {(t.scenario.id, t.seed): store.read_summary(t.path).get("error") for t in tasks}
    s = {(t.scenario.id, t.seed): store.read_summary(t.path) for t in tasks}
    for t in tasks:  # every run recorded once, with each of its detectors
        assert set(s[t.scenario.id, t.seed]["detectors"]) == set(t.detectors)
    assert not list(tmp_path.glob("*/.seed*")), "temporary folders left behind"

    watched = s["mlp-clean", 0]
    assert watched["outcome"] == "completed" and watched["steps_completed"] == 20
    det = watched["detectors"]
    assert "RuntimeError: boom at step 3" in det["boom"]["error"]
    assert "DetectorTimeout" in det["stall"]["error"]
    assert det["nonfinite"] == {**det["nonfinite"], "error": None, "alarms": 0}
    # the faulty detectors left the run itself untouched: bitwise the trace of a bare run
    assert watched["trace_digest"] == _reference("mlp-clean", 0, *SHORT)["trace_digest"]

    meddled = s["mlp-clean", 1]
    assert meddled["outcome"] == "completed" and meddled["detectors"]["meddler"]["error"] is None
    bare = compose_run(["scenario=mlp-clean", "seed=1", *SHORT])
    trace, ref = store.read_trace(Path(tasks[1].path)), execute(bare).trace
    assert trace.loc[:4, "loss"].equals(ref.loc[:4, "loss"])  # the same until it meddles
    assert not trace.loc[5:, "loss"].equals(ref.loc[5:, "loss"])
    assert meddled["trace_digest"] != watched["trace_digest"]

    nan = s["mlp-lr_too_high", 0]
    assert nan["outcome"] == "completed" and nan["nonfinite"]
    assert nan["detectors"]["nonfinite"]["alarms"] >= 1

    leak = s["mlp-loss_tensor_kept", 0]
    assert leak["outcome"] == "crashed"
    assert "MemoryError" in leak["error"] or "can't allocate memory" in leak["error"]

    inplace = s["mlp-inplace_op_autograd", 0]
    assert inplace["outcome"] == "crashed" and "RuntimeError" in inplace["error"]

    hung = s["mlp-clean", 2]
    assert hung["outcome"] == "hang" and hung["hung"] and "3 s" in hung["error"]

    assert _others(before) == [], "processes left behind"


def test_a_dying_worker_costs_only_its_own_run(plugins, tmp_path):
    out = str(tmp_path)
    doomed = RunTask(get_scenario("mlp-clean"), 0, SHORT, ("crasher", "nonfinite"), out, False, 120)
    after = RunTask(get_scenario("mlp-double_softmax"), 0, SHORT, ("nonfinite",), out, False, 120)
    # one reusable worker takes both in turn; the first ends the worker's process mid-run
    records = {r["scenario"]: r["outcome"] for r in run_tasks([doomed, after], workers=1)}
    assert records == {"mlp-clean": "crashed", "mlp-double_softmax": "completed"}
    summary = store.read_summary(doomed.path)
    assert "exited with code 70" in summary["error"]
    assert set(summary["detectors"]) == {"crasher", "nonfinite"}


CRASH_SCENARIOS = ["mlp-double_softmax", "mlp-lr_too_high"]  # each run beside its twin
CRASH_DETECTORS = ["grad_explosion", "loss_plateau", "nonfinite"]


def _bench_args(out: Path, workers: int) -> list[str]:
    return ["bench", "--scenarios", *CRASH_SCENARIOS, "--seeds", "0,1", "--workers",
            str(workers), "--out", str(out), "--no-progress", "--detectors", *CRASH_DETECTORS,
            *SHORT]


def _runs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("*/seed*/summary.json"))


def _board(out: Path) -> pd.DataFrame:
    """The leaderboard without its timing columns (seconds of delay, overhead)."""
    board = pd.read_csv(out / "leaderboard.csv")
    return board.drop(columns=[c for c in board.columns if "delay_s" in c or "overhead" in c])


@pytest.mark.slow
def test_kill_9_at_random_points_then_resume_equals_uninterrupted(tmp_path):
    ref = tmp_path / "reference"  # uninterrupted, serial, in this process: the bench's plan
    plan = plan_runs(select_scenarios(CRASH_SCENARIOS, controls=False), [0, 1], list(SHORT),
                     [], ref, 120, pairs=True, collect=True)  # the detectors are all sealed
    for task in plan:
        run_task(task)
    score_sweep_sealed(ref, CRASH_DETECTORS, progress=False)
    score_sweep(ref)
    n = len(plan)

    out, rng = tmp_path / "killed", random.Random(10)
    # completed runs before each kill, in the sweep's first half: its runs take a fraction of a
    # second, so a kill after nearly all of them could come after the last
    kill_after = sorted(rng.sample(range(1, n // 2 + 1), KILLS))
    seen: dict[Path, int] = {}
    cmd = [sys.executable, "-m", "bugzoo.cli", *_bench_args(out, workers=2)]
    for k in kill_after:
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while len(_runs(out)) < k and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 0.3))  # anywhere in the next run: mid-train or mid-write
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the bench, its workers, mid-sweep
        proc.wait()
        for path in _runs(out):  # what completed before stays as it was
            mtime = (path / "summary.json").stat().st_mtime_ns
            assert seen.setdefault(path, mtime) == mtime, f"{path} was redone"
    assert len(seen) < n, "every kill came too late to interrupt anything"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "resuming: " in done.stderr

    runs = _runs(out)
    assert [p.relative_to(out) for p in runs] == [p.relative_to(ref) for p in _runs(ref)]
    assert len(runs) == n and len(list(out.glob("*/*"))) == n, "a run lost or duplicated"
    assert not list(out.glob("*/.*")), "temporary or replaced folders left behind"
    for path in runs:  # nothing corrupt, nothing redone
        summary = json.loads((path / "summary.json").read_text())
        assert summary["outcome"] == "completed" and summary["steps_completed"] == 20
        assert len(store.read_trace(path)) == 20
        store.read_alarms(path)
        assert path not in seen or (path / "summary.json").stat().st_mtime_ns == seen[path]
        # determinism across processes: 2 resumed workers vs this process
        twin = store.read_summary(ref / path.relative_to(out))
        assert summary["trace_digest"] == twin["trace_digest"], path
    pd.testing.assert_frame_equal(_board(out), _board(ref))
    assert "bugzoo score" in (out / "leaderboard.md").read_text()
    assert (out / "outcomes.csv").read_text().count("\n") == n * len(CRASH_DETECTORS) + 1


@pytest.mark.parametrize("scenario", ["mlp-clean", "transformer-clean"])
def test_same_seed_same_trace_bitwise_on_cpu(scenario):
    overrides = [f"scenario={scenario}", "harness.steps=15", "harness.eval_interval=5",
                 "harness.device=cpu"]
    first, second = (execute(compose_run([*overrides, "seed=3"])) for _ in range(2))
    stable = [c for c in first.trace.columns if c not in TIMING_COLUMNS]
    assert first.trace[stable].equals(second.trace[stable])  # NaN == NaN here, bit for bit
    assert first.summary["trace_digest"] == second.summary["trace_digest"]
    other = execute(compose_run([*overrides, "seed=4"]))
    assert other.summary["trace_digest"] != first.summary["trace_digest"]


def test_another_kind_of_cpu_kernel_rounds_differently():
    """Bitwise holds on one kind of CPU kernel: the same run on torch's portable kernels
    (``ATEN_CPU_CAPABILITY=default``) makes another trace, and each run records its kernels."""
    import torch

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this CPU runs the portable kernels already")
    overrides = ["scenario=mlp-double_softmax", "seed=0", "harness.steps=30",
                 "harness.eval_interval=15", "harness.device=cpu"]
    here = execute(compose_run(overrides)).summary
    code = ("import json, sys; from bugzoo.config import compose_run; "
            "from bugzoo.harness.runner import execute; "
            "s = execute(compose_run(sys.argv[1:])).summary; "
            "print(json.dumps([s['cpu_kernels'], s['trace_digest']]))")
    done = subprocess.run([sys.executable, "-c", code, *overrides], capture_output=True,
                          text=True, check=True, env={**os.environ, "ATEN_CPU_CAPABILITY":
                                                      "default"})
    kernels, digest = json.loads(done.stdout.strip().splitlines()[-1])
    assert (kernels, here["cpu_kernels"]) == ("DEFAULT", torch.backends.cpu.get_cpu_capability())
    assert digest != here["trace_digest"]
    # and the processor: another CPU with the same kernels may round differently as well
    assert here["cpu_model"] == cpu_model() and cpu_model() not in ("", "unknown")


def test_time_budget_cuts_a_call_off_inside_and_outside_a_run_scope():
    from bugzoo.harness.budget import DetectorTimeout, TimeBudget, budget_scope

    before = signal.getsignal(signal.SIGALRM)
    with pytest.raises(DetectorTimeout, match="0.2 s per call"), TimeBudget(0.2):
        time.sleep(5)
    assert signal.getsignal(signal.SIGALRM) is before  # outside a scope: put back per call
    with budget_scope():
        scoped = signal.getsignal(signal.SIGALRM)
        with TimeBudget(10):
            pass
        assert signal.getsignal(signal.SIGALRM) is scoped  # inside: left in place, only armed
        with pytest.raises(DetectorTimeout), TimeBudget(0.2):
            time.sleep(5)
        time.sleep(0.3)  # disarmed after the call: nothing fires later
    assert signal.getsignal(signal.SIGALRM) is before


def test_a_round_of_budgeted_calls_arms_the_timer_once_and_cuts_off_only_a_late_call():
    """Inside a run's scope a call notes its deadline; the timer, armed by the round's first
    call, is re-armed for a call with time left, so each call keeps its whole budget however
    long the round; after the round the timer is disarmed."""
    from bugzoo.detector import Detector
    from bugzoo.harness.budget import budget_scope
    from bugzoo.harness.watch import Watch, observer

    class Nap(Detector):
        def __init__(self, seconds: float):
            self.seconds = seconds

        def observe(self, obs):
            time.sleep(self.seconds)
            return []

    watches = [Watch(Nap(0.2), 0.3) for _ in range(3)] + [Watch(Nap(5), 0.3)]
    t0 = time.perf_counter()
    with budget_scope():
        observer(watches)(None)  # 0.6 s of calls past the first arming: only the last is late
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0  # nothing fires into the next step
    assert time.perf_counter() - t0 < 2
    assert [w.error is None for w in watches] == [True, True, True, False]
    assert "DetectorTimeout" in watches[-1].error and "0.3 s per call" in watches[-1].error


@pytest.mark.slow
def test_the_next_sweep_of_a_process_reuses_its_idle_workers_unless_the_environment_changed(
        tmp_path, monkeypatch):
    def one_run(seed: int) -> None:
        task = RunTask(get_scenario("mlp-clean"), seed, SHORT, ("nonfinite",), str(tmp_path),
                       isolate=False, timeout_s=120)
        assert sweep([task], workers=1, progress=False) == {"completed": 1}

    one_run(0)
    kept, server = parked_workers(), forkserver._forkserver._forkserver_pid
    assert kept, "the sweep kept no idle worker"
    one_run(1)
    assert parked_workers() == kept, "the second sweep started a worker of its own"
    monkeypatch.setenv("BUGZOO_POOL_TEST", "1")  # a worker reads its environment once
    one_run(2)
    assert parked_workers() - kept, "a worker started before the change was given a task"
    assert forkserver._forkserver._forkserver_pid != server
    # back in the first environment, its server forks again: it need not import anything anew
    monkeypatch.delenv("BUGZOO_POOL_TEST")
    one_run(3)
    assert forkserver._forkserver._forkserver_pid == server
    assert server in server_pids()


def test_parked_servers_beyond_two_are_let_go_and_a_dead_one_is_not_unparked(
        monkeypatch, tmp_path):
    """Servers are parked per environment up to ``PARKED_SERVERS``; the oldest beyond that is
    let go (its alive pipe closed, its socket file removed, its exit collected), and a parked
    server that has died is let go instead of made the running one. (Stand-ins here: a pipe,
    a file and an ended process for each server, in a fork-server object of the test's own.)"""
    monkeypatch.setattr(forkserver, "_forkserver", forkserver.ForkServer())
    monkeypatch.setattr(processes, "_parked", {})
    monkeypatch.setattr(processes, "_retired", [])
    server = forkserver._forkserver
    started = []
    for key in range(4):
        read_end, alive = os.pipe()
        address = tmp_path / f"server{key}"
        address.touch()
        pid = os.posix_spawnp("true", ["true"], os.environ)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # ended, its status not collected
        server._forkserver_pid, server._forkserver_alive_fd = pid, alive
        server._forkserver_address = str(address)
        started.append((read_end, address))
        processes._park_server(key)
    assert list(processes._parked) == [2, 3]  # the two newest
    for read_end, address in started[:2]:
        assert os.read(read_end, 1) == b"" and not address.exists()  # alive pipe closed
    assert not processes._unpark_server(3)  # its process has ended: let go, not served
    assert server._forkserver_pid is None and list(processes._parked) == [2]
    processes._reap_retired()
    assert processes._retired == []
    for read_end, _ in started:
        os.close(read_end)
    os.close(processes._parked.pop(2)[1])


def test_a_variable_a_library_sets_to_its_own_default_keeps_the_fork_server(monkeypatch):
    """torch sets its compile cache folder in the environment on first use, joblib an OpenMP
    workaround on import: a worker would set each to the same value, so neither starts
    another server; another value does, as any other variable would."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    # from unset: a machine (a CI runner) may have either set already, to any value
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("KMP_INIT_AT_FORK", raising=False)
    before = processes.environment_key()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(default_cache_dir()))
    monkeypatch.setenv("KMP_INIT_AT_FORK", "FALSE")
    assert processes.environment_key() == before
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/elsewhere")
    assert processes.environment_key() != before


def ask_at_once(start: threading.Barrier) -> None:
    start.wait()
    processes.worker_context()


def test_worker_contexts_asked_for_from_many_threads_at_once_reap_each_retired_server_once(
        monkeypatch):
    # task validation starts a buggy script and its fixed twin from two threads at once;
    # both collect the fork servers an environment change retired
    processes.worker_context()  # any server of an older environment is retired now
    for round_ in range(20):
        # spawned bare: a Popen that is let go is reaped by the next Popen
        ended = [os.posix_spawnp("true", ["true"], os.environ) for _ in range(4)]
        for pid in ended:  # wait until each has exited, leaving its status to be collected
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        monkeypatch.setattr(processes, "_retired", list(ended))
        start = threading.Barrier(8)
        with ThreadPoolExecutor(8) as pool:
            for call in [pool.submit(ask_at_once, start) for _ in range(8)]:
                call.result()
        assert processes._retired == [], f"round {round_}"


def test_a_resumed_sweep_makes_again_the_runs_other_code_made(tmp_path):
    """A stored run counts as done only if this checkout's code made it: its summary records
    its scenario's release key, and a sweep resumed after a change to that scenario's code
    (`bugzoo validate --changed`, a test split finished later) runs it again instead of
    mixing it in. A run stored before summaries held keys counts when its release is today's."""
    scenario = get_scenario("mlp-double_softmax")
    today = release.scenario_key(scenario.id)
    made = execute(quick_cfg("scenario=mlp-double_softmax", steps=5)).summary
    assert made["key"] == today and made["release"] == release.digest()
    task = RunTask(scenario, 0, (), ("nonfinite",), str(tmp_path), False, 60.0)
    task.path.mkdir(parents=True)
    assert resume_state(task) == "missing"
    for stored, state in [({"key": today}, "done"), ({"key": "0" * 16}, "other code"),
                          ({"release": release.digest()}, "done"),
                          ({"release": "0" * 16}, "other code"),
                          ({"key": today, "detectors": {}}, "unwatched")]:
        stored = {"detectors": {"nonfinite": {}}, **stored}
        (task.path / "summary.json").write_text(json.dumps(stored))
        assert resume_state(task) == state, stored
        assert is_done(task) is (state == "done"), stored
