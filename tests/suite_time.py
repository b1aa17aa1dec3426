"""How long README's test command takes, against its budget of 8 minutes on 2 cores.

Runs the suite as README does (``pytest -q -n 2``, with per-test durations) and writes
``results/perf/suite.csv`` (seconds each test file held a worker, and its tests) and
``results/perf/suite.md`` (the run's wall and CPU time, and the files that cost most).

The machine's speed moves from day to day, so the page also times a fixed workload before and
after the suite, in this process: one clean mlp run on its defaults, in CPU seconds. Compare two
suite times only together with it.

    python tests/suite_time.py
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from bugzoo.config import compose_run
from bugzoo.harness.runner import execute

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["pytest", "-q", "-n", "2"]  # README's, after its install step
BUDGET_S = 480
DURATION = re.compile(r"^([0-9.]+)s (call|setup|teardown)\s+(\S+?)::")
OUTCOME = re.compile(r"^=* ?(\d+ passed.*) in [0-9.]+s")


@dataclass(frozen=True)
class Reference:
    """One clean mlp run on its defaults, one thread (medians of a few): its CPU and wall
    seconds, and the machine's 1-minute load average just before. CPU seconds show how fast
    the cores run; wall seconds beside them, and the load, show cores that others share."""

    cpu_s: float
    wall_s: float
    load: float


def reference(repeats: int = 3) -> Reference:
    torch.set_num_threads(1)
    cfg = compose_run(["scenario=mlp-clean"])
    load = os.getloadavg()[0]
    cpu, wall = [], []
    for _ in range(repeats):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        execute(copy.deepcopy(cfg))
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return Reference(statistics.median(cpu), statistics.median(wall), load)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_suite() -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (every process the suite started and waited for) and output."""
    cpu, start = children_cpu_s(), time.monotonic()
    done = subprocess.run([sys.executable, "-m", *COMMAND, "--durations=0", "--durations-min=0",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"the suite failed (exit {done.returncode}): {done.stdout[-2000:]}")
    return wall, children_cpu_s() - cpu, done.stdout


def per_file(output: str) -> pd.DataFrame:
    """Seconds each test file held a worker (setup, call and teardown) and its test count."""
    rows = [(m[3], float(m[1]), m[2] == "call") for line in output.splitlines()
            if (m := DURATION.match(line))]
    frame = pd.DataFrame(rows, columns=["file", "worker_s", "call"])
    return (frame.groupby("file").agg(worker_s=("worker_s", "sum"), tests=("call", "sum"))
            .sort_values("worker_s", ascending=False).round(1).reset_index())


def page(wall: float, cpu: float, before: Reference, after: Reference, outcome: str,
         files: pd.DataFrame) -> str:
    top = files.head(15)
    lines = [
        "# Test suite time", "",
        "Made by `python tests/suite_time.py`: README's test command (`pytest -q -n 2`) on this "
        "machine's 2 cores, against the budget of 8 minutes. *Reference* is the CPU time of one "
        "clean mlp run on its defaults, timed in one process before and after the suite: the "
        "machine's speed moves from day to day, so compare suite times only beside it. "
        "*Worker seconds* are the time a test file held a pytest worker (its tests' setup, call "
        "and teardown, waiting on the processes they start included).", "",
        "| measure | value |", "|---|---|",
        f"| wall time | {wall:.0f} s (budget {BUDGET_S} s) |",
        f"| CPU time of the suite's processes | {cpu:.0f} s |",
        f"| reference run, before / after | {before.cpu_s:.2f} / {after.cpu_s:.2f} CPU-s, "
        f"{before.wall_s:.2f} / {after.wall_s:.2f} wall-s |",
        f"| load average (1 min), before / after | {before.load:.2f} / {after.load:.2f} |",
        f"| outcome | {outcome} |", "",
        f"The {len(top)} files that held workers longest, of {len(files)} "
        "(all in `results/perf/suite.csv`):", "",
        "| file | worker seconds | tests |", "|---|---|---|",
        *(f"| {r.file} | {r.worker_s:.1f} | {r.tests} |" for r in top.itertuples()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "perf")
    args = parser.parse_args(argv)
    before = reference()
    wall, cpu, output = run_suite()
    after = reference()
    outcome = next((m[1] for line in output.splitlines() if (m := OUTCOME.match(line))), "?")
    files = per_file(output)
    args.out.mkdir(parents=True, exist_ok=True)
    files.to_csv(args.out / "suite.csv", index=False)
    (args.out / "suite.md").write_text(page(wall, cpu, before, after, outcome, files))
    print(f"suite: {wall:.0f} s wall, {cpu:.0f} CPU-s; reference {before.cpu_s:.2f} / "
          f"{after.cpu_s:.2f} CPU-s, load {before.load:.2f} / {after.load:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
