"""Every key of the committed results, as a checkout's code computes them.

One list per kind of result, in the order the committed tables hold their rows: the runs (per
scenario of the release), the validity, health and language rows, the exported pairs, the task
set's rows and the agent grades. ``bugzoo results perf changed`` compares two checkouts'
collections to count what an edit reruns; ``bugzoo results provenance rekey`` maps one onto the
other to carry results across a change of the key scheme.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bugzoo.errors import UsageError
from bugzoo.paths import PACKAGE

RESULTS = PACKAGE.parent / "results"
# what in a checkout decides its results' keys (oracle_variant draws the harmless verdicts)
DECIDING = ("bugzoo", "detectors", "conf", "scenarios", "pyproject.toml", "results/harmless.csv")
# run in a checkout: every key of the committed results, as its code computes them (the
# agent grades' key changed shape when solvers got keys of their own)
COLLECT = r"""
import json, sys
import pandas as pd
from bugzoo import release
from bugzoo.judge import validity
from bugzoo.teach.tasks import exported, taskset
from bugzoo.scenarios import get_scenario
results = sys.argv[1]
tables = {n: pd.read_csv(f"{results}/{n}.csv") for n in ("validity", "health", "language")}
rows = validity.with_keys(*(t.drop(columns="key") for t in tables.values()), [0, 1, 2, 3, 4], [])
pairs = pd.read_csv(f"{results}/validity_exported.csv")["scenario"]
tasks = pd.read_csv(f"{results}/tasks.csv")["scenario"]
grades = pd.read_csv(f"{results}/agents.csv")[["scenario", "solver"]].values
sets = {s: taskset.set_key(s, 0) for s in tasks}
try:
    from bugzoo.teach.tasks.carry import grade_key
    graded = [grade_key(sets[s], get_scenario(s).model, v) for s, v in grades]
except ImportError:
    from bugzoo.release import key_of
    graded = [key_of(sets[s], v) for s, v in grades]
print(json.dumps({
    "runs": {s: release.scenario_key(s) for s in release.live_manifest()["scenarios"]},
    "validity": list(rows[0]["key"]), "health": list(rows[1]["key"]),
    "language": list(rows[2]["key"]),
    "pairs": [exported.pair_key(s) for s in pairs], "tasks": list(sets.values()),
    "grades": graded}))
"""


def collect(tree: Path, results: Path = RESULTS) -> dict:
    """Every key of the results committed in ``results`` as the checkout at ``tree`` computes
    them, in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(tree), "BUGZOO_CACHE": "off"}
    done = subprocess.run([sys.executable, "-c", COLLECT, str(results)], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"collecting the keys of {tree} failed: {last}")
    return json.loads(done.stdout.splitlines()[-1])


def check_checkout(tree: Path) -> None:
    """A one-line error unless ``tree`` is a bugzoo checkout (given as another code's)."""
    if not (tree / "bugzoo" / "release.py").is_file():
        raise UsageError(f"{tree} is not a bugzoo checkout")
