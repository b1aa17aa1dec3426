"""``bugzoo validate``: prove every scenario's bug manifests against clean runs.

For each scenario, its bug's declared symptom metric is compared over several seeds between the
buggy runs and clean controls with the same settings: one-sided Mann-Whitney U for metrics,
Fisher's exact test for events (NaN, crash, hang). A scenario is valid at p < alpha (0.01).
Runs are stored under ``results/runs/validity/{buggy,control}/`` and reused on later calls.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run, resolved, scenarios
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.harness.bench import parse_seeds, scenario_bug, scenario_plan, sweep
from bugzoo.harness.pool import RunTask
from bugzoo.symptoms import compare
from bugzoo.tables import markdown

log = logging.getLogger(__name__)

ALPHA = 0.01
DEFAULT_SEEDS = "0,1,2,3,4"
COMMAND = "bugzoo validate"


def _settings(overrides: list[str]) -> dict:
    """A run config stripped of what names the run, to compare settings between runs."""
    cfg = resolved(compose_run(overrides))
    for key in ("scenario", "seed", "bug"):
        cfg.pop(key, None)
    return cfg


def control_of(scenario: str) -> tuple[str, tuple[str, ...]]:
    """The clean control of a buggy scenario: ``<model>-clean`` when the settings match it,
    else the scenario itself with the bug removed. Returns (scenario id, extra overrides)."""
    model = compose_run([f"scenario={scenario}"]).model.name
    clean = f"{model}-clean"
    if clean in scenarios() and _settings([f"scenario={scenario}", "~bug"]) == _settings(
            [f"scenario={clean}"]):
        return clean, ()
    return scenario, ("~bug",)


def plan_tasks(root: Path, patterns: list[str] | None, seeds: list[int],
               overrides: list[str], include_excluded: bool = False
               ) -> tuple[list[RunTask], dict[str, str]]:
    """Runs needed to validate the chosen buggy scenarios; also maps scenario -> control id."""
    plan = scenario_plan(patterns, include_excluded=include_excluded)
    timeout = float(compose_run(overrides).harness.timeout_s)
    tasks: dict[Path, RunTask] = {}
    controls: dict[str, str] = {}
    for sid, isolate in plan.items():
        if scenario_bug(scenarios()[sid]) is None:
            continue
        control, extra = control_of(sid)
        controls[sid] = control
        # "varies" symptoms compare two runs of the same seed: run each one twice
        twice = get_bug(scenario_bug(scenarios()[sid])).symptom.direction == "varies"
        for seed in seeds:
            for prefix in ("", "repeat-") if twice else ("",):
                for task in (
                    RunTask(sid, seed, tuple(overrides), (), str(root / f"{prefix}buggy"),
                            isolate, timeout),
                    RunTask(control, seed, (*extra, *overrides), (),
                            str(root / f"{prefix}control"), isolate, timeout),
                ):
                    tasks[task.path] = task
    return list(tasks.values()), controls


def read_metric(root: Path, sweep_dir: str, scenario: str, seeds: list[int], metric: str) -> list:
    return [store.read_summary(store.run_dir(root, sweep_dir, scenario, s)).get(metric)
            for s in seeds]


def summarise(root: Path, controls: dict[str, str], seeds: list[int]) -> pd.DataFrame:
    """One row per scenario: the symptom test's statistics."""
    rows = []
    for sid, control in sorted(controls.items()):
        bug = get_bug(scenario_bug(scenarios()[sid]))
        metric, direction = bug.symptom.metric, bug.symptom.direction
        buggy = read_metric(root, "buggy", sid, seeds, metric)
        clean = read_metric(root, "control", control, seeds, metric)
        if direction == "varies":  # did the repeat of each seed differ from its first run?
            buggy = [a != b for a, b in zip(
                buggy, read_metric(root, "repeat-buggy", sid, seeds, metric), strict=True)]
            clean = [a != b for a, b in zip(
                clean, read_metric(root, "repeat-control", control, seeds, metric), strict=True)]
        p, effect = compare(metric, direction, buggy, clean)
        rows.append({
            "scenario": sid, "bug": bug.id, "model": sid.split("-", 1)[0],
            "category": bug.category, "metric": metric, "direction": direction,
            "seeds": len(seeds), "control": control, "p_value": p, "effect": effect,
            "valid": p < ALPHA,
        })
    return pd.DataFrame(rows)


def write_tables(table: pd.DataFrame, out_dir: Path, command: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "validity.csv", index=False)
    shown = table.assign(p_value=table.p_value.map(lambda p: f"{p:.2g}"),
                         effect=table.effect.map(lambda e: f"{e:+.3g}"),
                         valid=table.valid.map({True: "yes", False: "**no**"}))
    excluded = {sid: node["excluded"] for sid, node in scenarios().items() if node.get("excluded")}
    lines = [
        "# Benchmark validity",
        "",
        f"Regenerate with `{command}`. Each scenario's declared symptom metric, buggy runs vs "
        f"clean controls with the same settings, {int(table.seeds.max()) if len(table) else 0} "
        f"seeds each; one-sided Mann-Whitney U (metrics) or Fisher's exact test (events). "
        f"Valid at p < {ALPHA}. Effect: difference of medians (metrics) or of event rates.",
        "",
        f"**{int(table.valid.sum())} of {len(table)} scenarios valid.**",
        "",
        markdown(shown[["scenario", "bug", "model", "metric", "direction", "effect", "p_value",
                        "valid"]]),
    ]
    if excluded:
        lines += ["", "## Excluded from the default sweep", ""]
        lines += [f"- `{sid}`: {reason}" for sid, reason in sorted(excluded.items())]
    (out_dir / "validity.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo validate", description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="run-setting overrides, e.g. harness.steps=100")
    p.add_argument("--scenarios", nargs="+", metavar="GLOB", help="scenario id globs")
    p.add_argument("--seeds", default=DEFAULT_SEEDS, help=f"default {DEFAULT_SEEDS}")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--runs", default="results/runs/validity", help="where runs are stored")
    p.add_argument("--out", default="results", help="where validity.md/.csv are written")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_intermixed_args(argv)
    seeds = parse_seeds(args.seeds)
    if len(seeds) < 5:
        log.warning("fewer than 5 seeds: p < %.2g may be out of reach", ALPHA)
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    root = store.ensure_writable(Path(args.runs))
    tasks, controls = plan_tasks(root, args.scenarios, seeds, args.overrides)
    sweep(tasks, args.workers, progress=not args.no_progress)
    table = summarise(root, controls, seeds)
    command = " ".join([COMMAND, *argv])
    write_tables(table, Path(args.out), command)
    print(f"{int(table.valid.sum())} of {len(table)} scenarios valid -> {args.out}/validity.md")
    invalid = table[~table.valid]
    if len(invalid):
        print("invalid: " + ", ".join(invalid.scenario))
    return 0
