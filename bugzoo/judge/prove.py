"""``bugzoo results provenance prove``: carry stored runs across a change that computes the same traces.

A run's key moves with any change of the code it reaches, a refactor too. This proves such a
change neutral instead of remaking every run: for each scenario of a trace set whose runs do
not hold today's key, one stored seed is run again by today's code on this machine, in the
same configuration (its buggy run and its disarmed twin, or its one healthy run; a
distributed scenario's ranks started as a sweep starts them). Where every
trace digest equals the stored run's, the scenario is proven. Where one differs (runs made on
another machine's kernels round differently) and ``--against`` names a checkout of the code
that made them (``git worktree add ../base <rev>``), the same runs are made under it too, and
the scenario is proven where both checkouts agree. A proven scenario's stored runs are given
today's key, and the proof joins ``provenance.csv`` beside the trace set. The validity, health
and language rows beside the trace set (a results folder) are carried with them: a row whose
key is the one its scenarios' stored runs gave it, and whose scenarios all now hold today's
key, takes today's key. Where the traces differ, the runs keep their key and are remade by
the next ``bugzoo results traces export --keep-unchanged``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from bugzoo import release
from bugzoo.bugs import builtin_ids
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import traceset
from bugzoo.harness.sweep import select_scenarios
from bugzoo.judge import rekey, validity
from bugzoo.judge.committed_keys import check_checkout
from bugzoo.judge.rekey import rekeyed_lines, replace_file
from bugzoo.judge.tables import markdown
from bugzoo.paths import PACKAGE
from bugzoo.provenance import CODE, code_key, code_reached, key_of

log = logging.getLogger(__name__)
PROOFS = "provenance.csv"
PROGRESS = "run made"  # a line RUN prints after each run, for the progress bar
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
    print(PROGRESS, flush=True)
print(json.dumps({"keys": keys, "digests": digests}))
""".replace("PROGRESS", repr(PROGRESS))


# run in a checkout: the code validity rows are made with, per definition (the same private
# text the keys hash, which every checkout since 2.0 has)
ROW_CODE = r"""
import json
from bugzoo.judge.validity import ROW_ENTRIES
from bugzoo.provenance import CODE, code_key, key_of
units = {f"{m}:{n}": key_of(CODE._text(m, n, frozenset())) for m, n in CODE.reached(*ROW_ENTRIES)}
print(json.dumps({"key": code_key(*ROW_ENTRIES), "units": units}))
"""
# what a proof runs (RUN above): the row code it executes is covered by the traces it compares
PROOF_ENTRIES = ("bugzoo.config:compose_run", "bugzoo.harness.runner:execute",
                 "bugzoo.scenarios:get_scenario")


@dataclass(frozen=True)
class RowCode:
    """The code validity rows are made with, in one checkout: its key, and each definition's."""

    key: str
    units: dict[str, str]

    @classmethod
    def here(cls) -> RowCode:
        return cls(code_key(*validity.ROW_ENTRIES),
                   {f"{m}:{n}": key_of(CODE._text(m, n, frozenset()))
                    for m, n in code_reached(*validity.ROW_ENTRIES)})

    @classmethod
    def at(cls, checkout: Path) -> RowCode:
        env = {**os.environ, "PYTHONPATH": str(checkout), "BUGZOO_CACHE": "off"}
        done = subprocess.run([sys.executable, "-c", ROW_CODE], cwd=checkout, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"cannot read the row code of {checkout}: {last}")
        found = json.loads(done.stdout.splitlines()[-1])
        return cls(found["key"], found["units"])


def proof_covered() -> set[str]:
    """The definitions a proof runs: what composing and executing a run reaches, and every
    bug's code (each proven scenario's runs execute its own)."""
    entries = [*PROOF_ENTRIES, *(f"bugzoo.bugs.{bug}:BUG" for bug in builtin_ids())]
    return {f"{m}:{n}" for m, n in code_reached(*entries)}


def uncovered_row_code(before: RowCode, after: RowCode, covered: set[str]) -> list[str]:
    """The definitions of the row code that moved between ``before`` and ``after`` and that
    no proof ran (``covered``): where there is one, the rows' results may have moved although
    their runs did not, so no row is carried."""
    moved = {unit for unit in before.units.keys() | after.units.keys()
             if before.units.get(unit) != after.units.get(unit)}
    return sorted(moved - covered)


def run_in(checkout: Path, runs: list[tuple[str, int, bool]],
           made: Callable[[], object] = lambda: None) -> dict:
    """The scenario keys and trace digests of ``runs`` made by the code at ``checkout``;
    ``made`` is called as each run ends."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "BUGZOO_CACHE": "off"}
    with tempfile.TemporaryFile("w+") as errors:
        child = subprocess.Popen([sys.executable, "-c", RUN, json.dumps(runs)], cwd=checkout,
                                 env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
        lines = []
        for line in child.stdout:
            if line.rstrip("\n") == PROGRESS:
                made()
            else:
                lines.append(line)
        if child.wait():
            errors.seek(0)
            last = (errors.read().strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"running under {checkout} failed: {last}")
    return json.loads(lines[-1])


def proof_runs(runs: pd.DataFrame) -> list[tuple[str, int, bool]]:
    """One stored seed of the scenario whose stored runs are ``runs``: its buggy run and twin,
    or its healthy run."""
    seed = int(runs["seed"].min())
    roles = set(runs.loc[runs["seed"] == seed, "role"])
    scenario = runs["scenario"].iloc[0]
    return [(scenario, seed, role != "control") for role in sorted(roles)]


def stored_digests(runs: pd.DataFrame, proof: list[tuple[str, int, bool]]) -> list[str | None]:
    """The stored trace digest of each run of ``proof`` (``runs``: its scenario's stored runs)."""
    out = []
    for _, seed, armed in proof:
        mine = runs[(runs["seed"] == seed) & ((runs["role"] != "control") == armed)]
        out.append(mine["trace_digest"].iloc[0] if len(mine) == 1 else None)
    return out


def run_halves(checkout: Path, runs: list[tuple[str, int, bool]]) -> dict:
    """:func:`run_in` on two cores: the runs split in two interpreters side by side, with a
    progress bar over both."""
    if not runs:
        return {"keys": {}, "digests": []}
    halves = [runs[: len(runs) // 2], runs[len(runs) // 2:]]
    with (tqdm(total=len(runs), unit="run", desc=f"runs under {checkout}") as bar,
          ThreadPoolExecutor(2) as pool):
        done = list(pool.map(lambda half: run_in(checkout, half, lambda: bar.update())
                             if half else {"keys": {}, "digests": []}, halves))
    return {"keys": {**done[0]["keys"], **done[1]["keys"]},
            "digests": done[0]["digests"] + done[1]["digests"]}


def prove(traces: Path, against: Path | None, patterns: list[str] | None = None,
          results: Path | None = None) -> pd.DataFrame:
    """Prove the stale scenarios of the trace set ``traces`` neutral (against its stored
    traces, then against the checkout ``against``) and carry those proven, with the validity
    rows of ``results``. One row per stale scenario, with its verdict."""
    if not traceset.is_traceset(traces):
        raise UsageError(f"{traces} is not a trace set (bugzoo results traces export writes one)")
    if against is not None:
        check_checkout(against)
    stored = pd.read_parquet(traces / traceset.RUNS_FILE)
    chosen = {s.id for s in select_scenarios(patterns, include_excluded=True)}
    today = {s: release.scenario_key(s) for s in set(stored["scenario"])}
    made_by = {s: set(keys) for s, keys in stored.groupby("scenario")["key"]}
    stale = sorted(s for s, key in today.items()
                   if s in chosen and key is not None and made_by[s] != {key})
    rows, to_run = [], {}
    for scenario in stale:
        to_run[scenario] = proof_runs(stored[stored["scenario"] == scenario])
    log.info("%d stale scenarios; %d runs under today's code",
             len(stale), sum(map(len, to_run.values())))
    after = run_halves(PACKAGE.parent, [run for runs in to_run.values() for run in runs])
    differ, at = {}, 0
    for scenario, runs in to_run.items():
        new = after["digests"][at:at + len(runs)]
        at += len(runs)
        if None not in new and new == stored_digests(stored[stored["scenario"] == scenario],
                                                     runs):
            rows.append(_proven(scenario, made_by[scenario], today[scenario], runs, new,
                                "its stored traces"))
        else:
            differ[scenario] = (runs, new)
    if differ and against is not None:
        log.info("%d scenarios differ from their stored traces; their runs under %s",
                 len(differ), against)
        before = run_halves(against, [run for runs, _ in differ.values() for run in runs])
        at = 0
        for scenario, (runs, new) in differ.items():
            old = before["digests"][at:at + len(runs)]
            at += len(runs)
            if made_by[scenario] != {before["keys"][scenario]}:
                rows.append({"scenario": scenario, "proven": False,
                             "why": f"its runs were not made by {against}'s code"})
            elif None in old or old != new:
                rows.append({"scenario": scenario, "proven": False, "why": "its traces differ"})
            else:
                rows.append(_proven(scenario, made_by[scenario], today[scenario], runs, new,
                                    str(against)))
    else:
        rows += [{"scenario": s, "proven": False,
                  "why": "its traces differ from the stored ones (--against compares two "
                         "checkouts on this machine)"} for s in differ]
    old_keys = {s: next(iter(keys)) for s, keys in made_by.items() if len(keys) == 1}
    if results is not None:  # the stale rows' scenarios that have no stored runs to compare
        missing = sorted(s for s in stale_rows_scenarios(results) - set(today)
                         if release.scenario_key(s) is not None)
        old_keys.update({s: release.scenario_key(s) for s in missing})  # unmoved, or no row matches
        if missing and against is not None:
            rows += prove_unstored(missing, against, old_keys)
    verdicts = pd.DataFrame(rows, columns=["scenario", "proven", "why", "old_key", "key",
                                           "seed", "trace_digests", "against"])
    proven = verdicts[verdicts["proven"].astype(bool)]
    carry(traces, stored, proven)
    if results is not None:
        current = ({s for s, key in today.items() if made_by[s] == {key}} |
                   set(proven["scenario"]) | (set(old_keys) - set(today) - set(verdicts["scenario"])))
        row_code, uncovered = None, []
        if against is not None:
            before, after = RowCode.at(against), RowCode.here()
            uncovered = uncovered_row_code(before, after, proof_covered())
            row_code = before.key
        verdicts.attrs["rows_uncovered"] = uncovered
        verdicts.attrs["rows_carried"] = 0 if uncovered else carry_rows(
            results, old_keys, current, row_code)
    return verdicts


def stale_rows_scenarios(results: Path) -> set[str]:
    """Every scenario whose runs decide a validity, health or language row of ``results`` that
    does not hold today's key."""
    bare = _row_tables(results)
    today = validity.with_keys(*bare.values(), _row_seeds(), [])
    out = set()
    for name, now, pairs in zip(bare, today, validity.row_scenarios(*bare.values()), strict=True):
        stored = pd.read_csv(results / f"{name}.csv", dtype={"key": str})["key"]
        out.update(s for key, new, pair in zip(stored, now["key"], pairs, strict=True)
                   if key != new for s in pair)
    return out


def _row_seeds() -> list[int]:
    return [int(s) for s in validity.VALIDITY_SEEDS.split(",")]  # as the committed rows were


def prove_unstored(scenarios: list[str], against: Path, old_keys: dict[str, str]) -> list[dict]:
    """Prove scenarios that have no stored runs (a validity row's control, a healthy variant
    the trace set leaves out) by one seed under both checkouts; ``old_keys`` takes the keys
    ``against`` gives the proven ones."""
    rows = []
    runs = [(s, 0, True) for s in scenarios]
    log.info("%d scenarios of the validity rows have no stored runs; each under both checkouts",
             len(runs))
    before, after = run_halves(against, runs), run_halves(PACKAGE.parent, runs)
    for at, scenario in enumerate(scenarios):
        old, new = before["digests"][at], after["digests"][at]
        if old is None or old != new:
            rows.append({"scenario": scenario, "proven": False, "why": "its traces differ"})
            continue
        old_keys[scenario] = before["keys"][scenario]
        rows.append(_proven(scenario, {before["keys"][scenario]},
                            release.scenario_key(scenario), runs[at:at + 1], [new], str(against)))
    return rows


def _row_tables(results: Path) -> dict[str, pd.DataFrame]:
    """The validity, health and language tables of ``results``, without their keys."""
    return {name: pd.read_csv(results / f"{name}.csv", dtype={"key": str}).drop(columns="key")
            for name in ("validity", "health", "language")}


def _proven(scenario: str, made_by: set[str], key: str, runs: list, digests: list[str],
            against: str) -> dict:
    return {"scenario": scenario, "proven": True, "why": "", "old_key": " ".join(sorted(made_by)),
            "key": key, "seed": runs[0][1], "trace_digests": " ".join(digests),
            "against": against}


def carry_rows(results: Path, old_keys: dict[str, str], current: set[str],
               row_code: str | None = None) -> int:
    """Give today's key to each validity, health and language row of ``results`` whose key
    is the one its scenarios' stored runs (``old_keys``) and the row code it was made with
    (``row_code``, today's by default) gave it, and whose scenarios all hold today's key now
    (``current``); how many rows were carried."""
    bare = _row_tables(results)
    then = validity.with_keys(*bare.values(), _row_seeds(), [],
                              run_key=lambda s: old_keys.get(s) if s in current else None,
                              row_code=row_code)
    now = validity.with_keys(*bare.values(), _row_seeds(), [])
    texts, carried = {}, 0
    for name, before, after in zip(bare, then, now, strict=True):
        stored = pd.read_csv(results / f"{name}.csv", dtype={"key": str})["key"]
        text, moved, _ = rekeyed_lines(results / f"{name}.csv", stored.fillna("").tolist(),
                                       list(before["key"]), list(after["key"]))
        if moved:
            texts[results / f"{name}.csv"], carried = text, carried + moved
    for path, text in texts.items():
        replace_file(path, text)
    return carried


def carry(traces: Path, stored: pd.DataFrame, proven: pd.DataFrame) -> None:
    """Give the proven scenarios' stored runs today's key, and record the proofs beside them."""
    if not len(proven):
        return
    keys = dict(zip(proven["scenario"], proven["key"], strict=True))
    stored = stored.assign(key=stored["scenario"].map(keys).fillna(stored["key"]).astype(
        stored["key"].dtype))
    path = traces / PROOFS  # the proofs first: a carried key never lacks its proof
    earlier = (pd.read_csv(path, dtype={"old_key": str, "key": str}) if path.is_file()
               else pd.DataFrame())
    kept = earlier[~earlier["scenario"].isin(keys)] if len(earlier) else earlier
    table = pd.concat([kept, proven.drop(columns=["proven", "why"])], ignore_index=True)
    table.sort_values("scenario").to_csv(path, index=False)
    traceset.rewrite_runs(traces, stored)


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results provenance",
                       description="; ".join(
                           f"{action}: {doc.splitlines()[0].partition(': ')[2].rstrip('.')}"
                           for action, doc in (("prove", __doc__), ("rekey", rekey.__doc__))))
    p.add_argument("action", choices=["prove", "rekey"])
    p.add_argument("--against", type=Path, metavar="CHECKOUT",
                   help="a checkout of the code that made the stored results (rekey: "
                        "required; prove: compared where today's traces differ from the stored)")
    p.add_argument("--traces", type=Path, default=Path("results/traces"),
                   help="prove: the trace set (default: results/traces)")
    p.add_argument("--scenarios", nargs="+", metavar="PATTERN",
                   help="prove: only these scenarios")
    p.add_argument("--task-set", type=Path, default=Path("results/runs/tasks"), metavar="DIR",
                   help="rekey: also the task set folder that task set --out wrote "
                        "(default: results/runs/tasks, where it exists)")
    args = p.parse_args(argv)
    if args.action == "rekey":
        if args.against is None:
            raise UsageError("rekey needs --against CHECKOUT, the code that keyed the results")
        moved = rekey.rekey(args.against.resolve(), task_set=args.task_set)
        print(markdown(moved))
        print(f"{int(moved['rekeyed'].sum())} results rekeyed, nothing trained "
              f"({command_line('results provenance', argv)})")
        return 0
    results = args.traces.parent if (args.traces.parent / "validity.csv").is_file() else None
    verdicts = prove(args.traces, args.against.resolve() if args.against else None,
                     args.scenarios, results)
    proven = int(verdicts["proven"].sum())
    for row in verdicts[~verdicts["proven"].astype(bool)].itertuples():
        print(f"{row.scenario}: not proven ({row.why})")
    if uncovered := verdicts.attrs.get("rows_uncovered"):
        print("no validity, health or language row carried: the code that makes them moved "
              f"where no proof runs ({', '.join(uncovered)}); `bugzoo results validate "
              "--changed` remakes them")
    rows = (f", with {verdicts.attrs['rows_carried']} validity, health and language rows of "
            f"{results}" if results is not None else "")
    print(f"{proven} of {len(verdicts)} stale scenarios proven neutral and carried{rows} "
          f"({command_line('results provenance', argv)})")
    return 0
