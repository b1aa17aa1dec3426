"""``bugzoo task validate``: every exported buggy script shows its symptom against its fixed twin.

An export is a second implementation of its bug, so it is proven on its own, the way
``bugzoo results validate`` proves the catalogue: both task scripts of each exportable scenario train
with the validity seeds (0-4), each script in a process of its own; the script's own summary
gives the bug's declared symptom metric; the catalogue's one-sided test
(:func:`bugzoo.judge.validity.compare`: exact permutation test of rank sums, Fisher's exact test
for events), Benjamini-Hochberg q-values across the scenarios, valid at q < 0.01. As in the
catalogue, a pair not valid although its effect interval excludes 0 is tested again over 10
seeds (:func:`bugzoo.judge.validity.to_power`). ``--changed`` reruns only the pairs whose key
moved (:mod:`.carry`; the key also holds the code of the test, this module and the catalogue's)
and carries the others' runs from the table in ``--out``; the q-values are recomputed over all
of them. (It is a ``task`` action rather than ``validate --exported``: the exports live in the
teaching layer, above the judge's.)
"""

from __future__ import annotations

import logging
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from bugzoo.bugs import get_bug
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser
from bugzoo.judge.tables import markdown
from bugzoo.judge.validity import (
    ALPHA,
    POWERED_SEEDS,
    VALIDITY_SEEDS,
    compare,
    merged,
    to_power,
    with_q_values,
)
from bugzoo.scenarios import get_scenario
from bugzoo.teach.export import exportable
from bugzoo.teach.tasks.carry import VALIDATE, carried_sentence, keyed_table, standing, task_key
from bugzoo.teach.tasks.make import empty_folder
from bugzoo.teach.tasks.runner import trained_runs
from bugzoo.teach.tasks.script import task_scripts

log = logging.getLogger(__name__)

SEEDS = [int(s) for s in VALIDITY_SEEDS.split(",")]


def validate_exports(scenarios: list[str], work: Path) -> pd.DataFrame:
    """One row per scenario: its exported pair's symptom test over the validity seeds, or over
    ``POWERED_SEEDS`` for a pair the catalogue's rule tests again."""
    pairs = {scenario: task_scripts(scenario) for scenario in scenarios}
    table = tested(pairs, SEEDS, work)
    if powered := to_power(with_q_values(table), SEEDS):
        log.info("not valid, with an effect interval that excludes 0: tested again over %d "
                 "seeds: %s", len(POWERED_SEEDS), ", ".join(powered))
        table = merged(tested({s: pairs[s] for s in powered}, POWERED_SEEDS, work), table)
    return table


def tested(pairs: dict[str, dict[str, str]], seeds: list[int], work: Path) -> pd.DataFrame:
    """One row per scenario of ``pairs`` (its task scripts): the symptom test over ``seeds``.

    Task scripts are neutral, so many scenarios of one model share their fixed script: each
    distinct script trains once (or is read from the run cache), two at a time, and every pair
    that holds it reads its summaries."""
    distinct = list(dict.fromkeys(text for scripts in pairs.values() for text in scripts.values()))
    done = [0]

    def summaries(number: int, text: str) -> list[dict[str, float]]:
        script = work / f"script{number:03d}-seeds{len(seeds)}.py"
        script.write_text(text)
        runs = trained_runs(script, seeds, script.with_suffix(".log"))
        done[0] += 1
        log.info("%d/%d scripts trained", done[0], len(distinct))
        return [run.observed for run in runs]  # empty where a run stopped first

    with ThreadPoolExecutor(2) as pool:
        observed = dict(zip(distinct, pool.map(summaries, range(len(distinct)), distinct),
                            strict=True))
    rows = []
    for scenario, scripts in pairs.items():
        bug = get_bug(get_scenario(scenario).bug)
        buggy, fixed = ([o.get(bug.check.metric) for o in observed[scripts[v]]]
                        for v in ("buggy", "fixed"))
        result = compare(bug.check.metric, bug.check.direction, buggy, fixed)
        rows.append({"scenario": scenario, "metric": bug.check.metric,
                     "direction": bug.check.direction, "seeds": len(seeds), "buggy": buggy,
                     "fixed": fixed, "effect": result.effect, "effect_lo": result.effect_lo,
                     "effect_hi": result.effect_hi, "p_value": result.p_value})
    return pd.DataFrame(rows)


def pair_key(scenario: str) -> str:
    return task_key(scenario, VALIDATE, SEEDS)


def carried_pairs(path: Path, scenarios: list[str]) -> pd.DataFrame:
    """The rows of the table at ``path`` for ``scenarios`` whose key is today's, their seeds'
    values read back as lists."""
    table = standing(keyed_table(path, "bugzoo task validate"),
                     {scenario: pair_key(scenario) for scenario in scenarios})
    return table.assign(buggy=table["buggy"].map(numbers), fixed=table["fixed"].map(numbers))


def numbers(text: str) -> list[float | None]:
    """A list of seeds' values as the CSV holds it (``[0.5, None, nan]``)."""
    inner = text.strip()[1:-1].strip()
    return [None if value == "None" else float(value) for value in inner.split(", ")
            ] if inner else []


def whole_table(new: pd.DataFrame, carried: pd.DataFrame) -> pd.DataFrame:
    """The pairs run now and the ones carried, by scenario, with q-values over all of them, the
    catalogue's verdict on each scenario and each row's key."""
    table = with_q_values(merged(new, carried.drop(columns=["catalogue", "key"],
                                                   errors="ignore")))
    return table.assign(catalogue=["unproven" if get_scenario(s).unproven else "proven"
                                   for s in table["scenario"]],
                        key=table["scenario"].map(pair_key))


def report(table: pd.DataFrame, command: str, carried: int = 0) -> str:
    def values(xs: list) -> str:
        return ", ".join("-" if x is None else f"{x:.3g}" for x in xs)
    invalid = table[~table["valid"]]
    unproven = list(invalid.loc[invalid["catalogue"] == "unproven", "scenario"])
    shown = table.assign(buggy=table["buggy"].map(values), fixed=table["fixed"].map(values),
                         effect=[f"{e:+.3g} [{lo:+.3g}, {hi:+.3g}]" for e, lo, hi in zip(
                             table["effect"], table["effect_lo"], table["effect_hi"],
                             strict=True)],
                         p_value=table["p_value"].map(lambda p: f"{p:.2g}"),
                         q_value=table["q_value"].map(lambda q: f"{q:.2g}"))
    return (f"# Exported pairs: validity\n\nRegenerate with `{command}`. Each exportable "
            "scenario's buggy script against its fixed twin (the task scripts of `bugzoo task`, "
            f"plain PyTorch), seeds {VALIDITY_SEEDS}, on the bug's declared symptom as the "
            "script's own summary reports it; as in the catalogue, a pair not valid although "
            f"its effect interval excludes 0 is tested again over {len(POWERED_SEEDS)} seeds "
            "(*seeds*). Exact one-sided p-values (permutation test of "
            "rank sums; Fisher's exact test for events), Benjamini-Hochberg q-values across "
            f"the scenarios, valid at q < {ALPHA}. Effect: difference of medians (of event "
            "rates for events), buggy minus fixed, with its 95% percentile-bootstrap interval. "
            "*catalogue*: whether `bugzoo results validate` "
            "proves the scenario itself or the catalogue declares it unproven (`results/"
            f"validity.md`).{carried_note(carried)}\n\n**{int(table['valid'].sum())} of "
            f"{len(table)} exported pairs are valid.** Of the {len(invalid)} others, "
            f"{len(unproven)} belong to scenarios the "
            f"catalogue leaves unproven too: {', '.join(unproven) or 'none'}.\n\n"
            f"{markdown(shown.drop(columns=['key', 'effect_lo', 'effect_hi']))}\n")


def carried_note(carried: int) -> str:
    return " " + carried_sentence(
        f"{carried} pairs' runs were", "their scripts and the code that runs them are unchanged "
        "since they ran") if carried else ""


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo task validate", description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", nargs="+", help="exportable scenarios (default: all)")
    p.add_argument("--work", type=Path, help="new folder to keep the scripts and their logs in "
                   "(default: a temporary one)")
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="where validity_exported.md and .csv go")
    p.add_argument("--changed", action="store_true", help="rerun only the pairs whose scripts "
                   "or running code changed; carry the others' rows from --out's table")
    args = p.parse_args(argv)
    scenarios = exportable(args.scenarios)
    carried = (carried_pairs(args.out / "validity_exported.csv", scenarios) if args.changed
               else pd.DataFrame(columns=["scenario"]))
    rerun = [s for s in scenarios if s not in set(carried["scenario"])]
    log.info("%d pairs to run, %d carried", len(rerun), len(carried))
    with tempfile.TemporaryDirectory() as scratch:
        work = empty_folder(args.work, "work folder") if args.work else Path(scratch)
        table = whole_table(validate_exports(rerun, work), carried)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "validity_exported.csv", index=False)
    text = report(table, command_line("task validate", argv), len(carried))
    (args.out / "validity_exported.md").write_text(text)
    print(text.split("\n\n")[2])
    return 0
