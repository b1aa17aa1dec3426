"""``bugzoo results provenance prove``: carry stored runs across a change that computes the same traces.

A run's key moves with any change of the code it reaches, a refactor too. This proves such a
change neutral instead of remaking every run: for each scenario of a trace set whose runs
hold the key of another checkout (``--against``, the code that made them, e.g. ``git worktree
add ../base <rev>``) and not today's, one stored seed is run again under both checkouts, on
this machine, in the same configuration (its buggy run and its disarmed twin, or its one
healthy run). Where every trace digest agrees, the scenario's stored runs are given today's
key and the proof joins ``provenance.csv`` beside the trace set; where any differs, or a run
cannot be made in one process (a distributed scenario), the runs keep their key and are
remade by the next ``bugzoo results traces export --keep-unchanged``. Two checkouts on one machine
round alike, so the comparison is fair whatever machine made the stored runs.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from bugzoo import release
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import traceset
from bugzoo.harness.sweep import select_scenarios
from bugzoo.judge import rekey
from bugzoo.judge.committed_keys import check_checkout
from bugzoo.judge.tables import markdown
from bugzoo.paths import PACKAGE

log = logging.getLogger(__name__)
PROOFS = "provenance.csv"
# run in a checkout: each (scenario, seed, armed) once, in one process, its trace digest out
RUN = r"""
import json, sys
import torch
from bugzoo import release
from bugzoo.config import compose_run
from bugzoo.harness.runner import execute
from bugzoo.scenarios import get_scenario
torch.set_num_threads(1)
runs, keys = json.loads(sys.argv[1]), {}
digests = []
for scenario, seed, armed in runs:
    keys[scenario] = release.scenario_key(scenario)
    result = execute(compose_run([f"seed={seed}"], scenario=get_scenario(scenario)), [],
                     armed=armed)
    digests.append(result.summary.get("trace_digest"))
print(json.dumps({"keys": keys, "digests": digests}))
"""


def run_in(checkout: Path, runs: list[tuple[str, int, bool]]) -> dict:
    """The scenario keys and trace digests of ``runs`` made by the code at ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "BUGZOO_CACHE": "off"}
    done = subprocess.run([sys.executable, "-c", RUN, json.dumps(runs)], cwd=checkout, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"running under {checkout} failed: {last}")
    return json.loads(done.stdout.splitlines()[-1])


def proof_runs(runs: pd.DataFrame) -> list[tuple[str, int, bool]]:
    """One stored seed of the scenario whose stored runs are ``runs``: its buggy run and twin,
    or its healthy run."""
    seed = int(runs["seed"].min())
    roles = set(runs.loc[runs["seed"] == seed, "role"])
    scenario = runs["scenario"].iloc[0]
    return [(scenario, seed, role != "control") for role in sorted(roles)]


def prove(traces: Path, against: Path, patterns: list[str] | None = None) -> pd.DataFrame:
    """Prove the stale scenarios of the trace set ``traces`` neutral between ``against`` and
    this checkout; carry those proven. One row per stale scenario, with its verdict."""
    if not traceset.is_traceset(traces):
        raise UsageError(f"{traces} is not a trace set (bugzoo results traces export writes one)")
    check_checkout(against)
    stored = pd.read_parquet(traces / traceset.RUNS_FILE)
    chosen = {s.id for s in select_scenarios(patterns, include_excluded=True)}
    today = {s: release.scenario_key(s) for s in set(stored["scenario"]) & chosen}
    stale = sorted(s for s, key in today.items()
                   if key is not None and set(stored.loc[stored["scenario"] == s, "key"]) != {key})
    rows, to_run = [], {}
    for scenario in stale:
        mine = stored[stored["scenario"] == scenario]
        if (mine["world_size"].fillna(1) > 1).any():
            rows.append({"scenario": scenario, "proven": False,
                         "why": "a distributed run cannot be made in one process"})
        else:
            to_run[scenario] = proof_runs(mine)
    flat = [run for runs in to_run.values() for run in runs]
    log.info("%d stale scenarios; %d runs under each checkout", len(stale), len(flat))
    with ThreadPoolExecutor(2) as pool:  # the two checkouts side by side, a core each
        before, after = pool.map(lambda tree: run_in(tree, flat) if flat else
                                 {"keys": {}, "digests": []}, (against, PACKAGE.parent))
    at = 0
    for scenario, runs in to_run.items():
        old, new = (d["digests"][at:at + len(runs)] for d in (before, after))
        at += len(runs)
        made_by = set(stored.loc[stored["scenario"] == scenario, "key"])
        if made_by != {before["keys"][scenario]}:
            rows.append({"scenario": scenario, "proven": False,
                         "why": f"its runs were not made by {against}'s code"})
        elif None in old or old != new:
            rows.append({"scenario": scenario, "proven": False, "why": "its traces differ"})
        else:
            rows.append({"scenario": scenario, "proven": True, "why": "",
                         "old_key": before["keys"][scenario], "key": today[scenario],
                         "seed": runs[0][1], "trace_digests": " ".join(new)})
    verdicts = pd.DataFrame(rows, columns=["scenario", "proven", "why", "old_key", "key",
                                           "seed", "trace_digests"])
    carry(traces, stored, verdicts[verdicts["proven"]])
    return verdicts


def carry(traces: Path, stored: pd.DataFrame, proven: pd.DataFrame) -> None:
    """Give the proven scenarios' stored runs today's key, and record the proofs beside them."""
    if not len(proven):
        return
    keys = dict(zip(proven["scenario"], proven["key"], strict=True))
    stored = stored.assign(key=stored["scenario"].map(keys).fillna(stored["key"]).astype(
        stored["key"].dtype))
    path = traces / PROOFS  # the proofs first: a carried key never lacks its proof
    earlier = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    kept = earlier[~earlier["scenario"].isin(keys)] if len(earlier) else earlier
    table = pd.concat([kept, proven.drop(columns=["proven", "why"])], ignore_index=True)
    table.sort_values("scenario").to_csv(path, index=False)
    traceset.rewrite_runs(traces, stored)


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results provenance",
                       description="prove: " + __doc__.splitlines()[0].partition(": ")[2] +
                       "; rekey: " + rekey.__doc__.splitlines()[0].partition(": ")[2])
    p.add_argument("action", choices=["prove", "rekey"])
    p.add_argument("--against", type=Path, required=True, metavar="CHECKOUT",
                   help="a checkout of the code that made the stored results")
    p.add_argument("--traces", type=Path, default=Path("results/traces"),
                   help="prove: the trace set (default: results/traces)")
    p.add_argument("--scenarios", nargs="+", metavar="PATTERN",
                   help="prove: only these scenarios")
    p.add_argument("--task-set", type=Path, default=Path("results/runs/tasks"), metavar="DIR",
                   help="rekey: also the task set folder that task set --out wrote "
                        "(default: results/runs/tasks, where it exists)")
    args = p.parse_args(argv)
    if args.action == "rekey":
        moved = rekey.rekey(args.against.resolve(), task_set=args.task_set)
        print(markdown(moved))
        print(f"{int(moved['rekeyed'].sum())} results rekeyed, nothing trained "
              f"({command_line('results provenance', argv)})")
        return 0
    verdicts = prove(args.traces, args.against.resolve(), args.scenarios)
    proven = int(verdicts["proven"].sum())
    for row in verdicts[~verdicts["proven"]].itertuples():
        print(f"{row.scenario}: not proven ({row.why})")
    print(f"{proven} of {len(verdicts)} stale scenarios proven neutral and carried "
          f"({command_line('results provenance', argv)})")
    return 0
