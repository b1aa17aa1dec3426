"""TrainCheck (invariant inference for training pipelines, OSDI 2025) run offline on exported
scripts, and scored on the benchmark's own scoring.

TrainCheck instruments a whole *script* (``traincheck-collect``), infers invariants from
traces of correct runs (``traincheck-infer``) and checks a new run's trace against them
(``traincheck-check``). It has no per-step in-process API a bugzoo :class:`Detector` could
drive, so it runs offline here, in the tools layer, rather than as a registered detector. It works on ``bugzoo
export``'s standalone mlp scripts (plain PyTorch), each as long as it needs to show its
symptom (or cut to ``steps``):

1. invariants are inferred from the clean script traced at each of ``train_seeds``;
2. every clean script is traced and checked at each of ``calibration_seeds``: an invariant
   the inferred-from script violates there does not even hold across seeds of its own
   pipeline; one another clean script violates does not hold for that healthy configuration;
3. every scored run is traced and checked at each of ``check_seeds`` (seeds neither inferred
   from nor calibrated on):

   * buggy runs: the buggy script of every exportable mlp scenario;
   * clean runs: each scenario's matched control (its fixed script, once per distinct text)
     and the reproducer's healthy variants (another batch size, optimizer, width, ...).

Each violated invariant is an alarm at the step TrainCheck first saw it violated. The runs are
scored by :mod:`bugzoo.judge.scoring` as three tools, one per way of using the invariants:

* ``traincheck``: every inferred invariant;
* ``traincheck_calibrated``: without those the clean script violates at ``calibration_seeds``
  (what a user with a few more clean runs of the pipeline they inferred from would drop);
* ``traincheck_calibrated_variants``: without those any clean script (controls and healthy
  variants too) violates at ``calibration_seeds`` (a user who also ran each configuration they
  will train cleanly at other seeds).

No scored run informs a calibration: the scored seeds are neither inferred from nor calibrated
on. TrainCheck names an invariant, not a kind of bug, so its alarms carry the category
``unknown``. Run::

    python -m bugzoo.tools.traincheck --out results/runs/tools-traincheck \\
        [--steps N] [--check-seeds 2,3,4]

It writes ``runs.csv`` (one row per traced script), ``outcomes.csv`` and ``leaderboard.md``
into ``--out``. A script whose check is already in ``--out`` is not traced again, so an
interrupted run resumes.

Optional: needs ``pip install -c constraints.txt 'bugzoo-bench[tools]'`` (``traincheck``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pandas as pd

from bugzoo.bugs import get_bug
from bugzoo.harness.store import ALARM_COLUMNS
from bugzoo.judge.outcomes import judge_run
from bugzoo.judge.scoring import write_boards
from bugzoo.scenarios import get_scenario
from bugzoo.teach.export import healthy_variants, render, render_clean, supported

log = logging.getLogger(__name__)

EXTRA_HINT = "TrainCheck is not installed: pip install -c constraints.txt 'bugzoo-bench[tools]'"
RAW, CALIBRATED, VARIANTS = "traincheck", "traincheck_calibrated", "traincheck_calibrated_variants"
STEPS_LINE = re.compile(r"^STEPS, (.*?) = \d+,", re.M)
SEED_LINE = "torch.manual_seed(0)"
CONTROL = "mlp-clean"


@dataclass(frozen=True)
class Script:
    """One script to trace: ``scenario`` names it; ``bug`` is None for a clean script, which
    may be the fixed twin of buggy scripts (``controls``: their scenarios and bugs)."""

    scenario: str
    bug: str | None
    text: str  # with ``${SEED}`` where the seed goes
    controls: tuple[tuple[str, str], ...] = ()

    def at(self, seed: int) -> str:
        return self.text.replace("${SEED}", str(seed))


def available() -> str | None:
    """Why TrainCheck cannot run here, or ``None`` when its three commands are on PATH."""
    missing = [c for c in ("traincheck-collect", "traincheck-infer", "traincheck-check")
               if shutil.which(c) is None]
    return f"{', '.join(missing)} not found ({EXTRA_HINT})" if missing else None


def shortened(text: str, steps: int | None) -> str:
    """An exported script cut to ``steps`` steps (None: as exported), with ``${SEED}`` in place
    of its seed."""
    if not STEPS_LINE.search(text) or SEED_LINE not in text:
        raise ValueError(f"exported script lacks the STEPS line or {SEED_LINE}")
    if steps is not None:
        text = STEPS_LINE.sub(lambda m: f"STEPS, {m.group(1)} = {steps},", text, count=1)
    return text.replace(SEED_LINE, "torch.manual_seed(${SEED})", 1)


def scripts(steps: int | None) -> list[Script]:
    """The scored scripts: each exportable mlp scenario's buggy script, then the clean ones:
    the default clean script, the healthy variants, and the matched controls whose code
    differs from all of those (a scenario may change both its scripts). A control that is a
    healthy variant's code (dropout 0.5) is scored once, under the variant's name, in both
    roles."""
    buggy, clean = [], {_code(render_clean()): Script(CONTROL, None,
                                                      shortened(render_clean(), steps))}
    for variant in healthy_variants("mlp"):
        text = render_clean(variant)
        clean.setdefault(_code(text), Script(f"mlp-clean-{variant}", None,
                                             shortened(text, steps)))
    controls: dict[str, list[tuple[str, str]]] = {}  # fixed code -> the buggy scripts it twins
    for scenario in supported():
        spec = get_scenario(scenario)
        if spec.model != "mlp":
            continue
        pair = render(scenario)
        buggy.append(Script(scenario, spec.bug, shortened(pair["buggy"], steps)))
        clean.setdefault(_code(pair["fixed"]), Script(f"{scenario}-control", None,
                                                       shortened(pair["fixed"], steps)))
        controls.setdefault(_code(pair["fixed"]), []).append((scenario, spec.bug))
    return buggy + [replace(script, controls=tuple(controls.get(code, ())))
                    for code, script in clean.items()]


def _code(script: str) -> str:
    """What a script runs, for telling clean scripts apart: without its module docstring and
    its last line (which name the scenario it came from and the metric it prints)."""
    return script.split('"""', 2)[2].rsplit("\nprint(", 1)[0]


def _run(cmd: list[str], cwd: Path, log_name: str) -> float:
    """Run one TrainCheck command; returns its wall time; raises with the log's tail on failure."""
    t0 = time.perf_counter()
    with open(cwd / log_name, "w") as out:
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = (cwd / log_name).read_text()[-2000:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{tail}")
    return time.perf_counter() - t0


def _plain_s(path: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, path.name], cwd=path.parent, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def infer(work: Path, text: str, seeds: tuple[int, ...]) -> Path:
    """Invariants inferred from ``text`` (a clean script) traced at each of ``seeds``."""
    invariants = work / "invariants.json"
    if invariants.is_file():
        return invariants
    for seed in seeds:
        name = f"clean_train{seed}"
        (work / f"{name}.py").write_text(text.replace("${SEED}", str(seed)))
        _run(["traincheck-collect", "-p", f"{name}.py", "--output-dir", f"trace_{name}"],
             work, f"collect_{name}.log")
    _run(["traincheck-infer", "-f", *[f"trace_clean_train{s}" for s in seeds],
          "-o", invariants.name], work, "infer.log")
    return invariants


def check_script(text: str, name: str, invariants: Path, work: Path) -> dict:
    """Trace and check one script; TrainCheck's violation summary plus timings, kept in
    ``result_<name>.json`` and read from there when it exists."""
    kept = work / f"result_{name}.json"
    if kept.is_file():
        return json.loads(kept.read_text())
    path = work / f"{name}.py"
    path.write_text(text)
    collect_s = _run(["traincheck-collect", "-p", path.name, "-i", str(invariants),
                      "--output-dir", f"trace_{name}"], work, f"collect_{name}.log")
    check_s = _run(["traincheck-check", "-f", f"trace_{name}", "-i", str(invariants), "-o",
                    f"check_{name}", "--no-html-report"], work, f"check_{name}.log")
    summary = json.loads((work / f"check_{name}" / f"trace_{name}" /
                          "violations_summary.json").read_text())
    result = {**summary, "collect_s": collect_s, "check_s": check_s, "plain_s": _plain_s(path)}
    shutil.rmtree(work / f"trace_{name}", ignore_errors=True)  # traces are large; kept: the check
    kept.write_text(json.dumps(result))
    return result


def violations(result: dict, ignore: set[str] = frozenset()) -> pd.DataFrame:
    """TrainCheck's violated invariants (not in ``ignore``) as alarms of one detector
    (``store.ALARM_COLUMNS``, without the detector), one per invariant at its first step."""
    return pd.DataFrame(
        [{"step": int(v["first_step"]), "symptom": "invariant_violated", "category": "unknown",
          "message": f"traincheck {v['relation_type']}: {v['display_name']}"}
         for v in result.get("violations", []) if v["display_name"] not in ignore],
        columns=ALARM_COLUMNS[1:])


def run_outcomes(script: Script, seed: int, result: dict,
                 dropped: dict[str, set[str]]) -> list[dict]:
    """Each detector's outcome on one traced run, judged as a sweep's run is (onset 0: every
    reproducer plants its mistake in the code its first step runs): a buggy script's, its
    fixed script's as the control of each buggy script it twins, and a healthy variant's.
    ``dropped``: per detector, the invariants it ignores (``RAW``: none)."""
    identity = {"role": "tool", "distribution": "traincheck", "version": _version(),
                "error": result.get("error")}
    ignored = {RAW: set(), **dropped}
    alarms = pd.concat([violations(result, ignore).assign(detector=name)
                        for name, ignore in ignored.items()])[ALARM_COLUMNS]
    if script.bug:
        runs = [(script.scenario, script.bug, "buggy")]
    else:
        runs = [(scenario, bug, "control") for scenario, bug in script.controls]
        if script.scenario.startswith(f"{CONTROL}-"):  # a healthy variant
            runs.append((script.scenario, None, "clean"))
    rows = []
    for scenario, bug_id, role in runs:
        bug = get_bug(bug_id) if bug_id else None
        summary = {"scenario": scenario, "model": "mlp", "seed": seed, "bug": bug_id,
                   "role": role, "category": bug.category if bug else None,
                   "loud": bool(bug and bug.loud),
                   "unproven": bool(bug and get_scenario(scenario).unproven), "onset": 0,
                   "detectors": dict.fromkeys(ignored, identity)}
        rows += judge_run(summary, alarms, pd.Series(dtype=float))
    return rows


def violated_at(script: Script, seeds: tuple[int, ...], invariants: Path, work: Path) -> set[str]:
    """The invariants ``script`` violates when traced at any of ``seeds`` (a calibration)."""
    return {v["display_name"] for seed in seeds
            for v in check_script(script.at(seed), f"calibrate_{script.scenario}_{seed}",
                                  invariants, work).get("violations", [])}


def _version() -> str:
    try:
        return version("traincheck")
    except PackageNotFoundError:
        return ""


def score_offline(out: Path, steps: int | None = None, check_seeds: tuple[int, ...] = (2, 3, 4),
                  train_seeds: tuple[int, ...] = (0, 1),
                  calibration_seeds: tuple[int, ...] = (5, 6), workers: int = 2,
                  only: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Infer, calibrate and check (see the module docstring); returns the per-run table and
    the outcome table (``bugzoo.judge.scoring`` rows). ``only``: score just these scenarios."""
    reason = available()
    if reason:
        raise ImportError(reason)
    work = Path(out).resolve()  # TrainCheck's commands run inside it
    work.mkdir(parents=True, exist_ok=True)
    every = scripts(steps)
    todo = [s for s in every if only is None or s.scenario in only]
    control = next(s for s in every if s.scenario == CONTROL)
    t0 = time.perf_counter()
    invariants = infer(work, control.text, train_seeds)
    log.info("invariants inferred from %d clean traces (%.0f s)", len(train_seeds),
             time.perf_counter() - t0)
    jobs = [(s, seed) for s in todo for seed in check_seeds]
    done = 0

    def traced(job: tuple[Script, int]) -> dict:
        nonlocal done
        script, seed = job
        try:
            result = check_script(script.at(seed), f"{script.scenario}_seed{seed}", invariants,
                                  work)
        except RuntimeError as e:  # recorded as the tool's error on that run, as a sweep does
            error = str(e).splitlines()[0]
            log.warning("%s seed %d: %s", script.scenario, seed, error)
            result = {"error": error, "collect_s": math.nan, "check_s": math.nan,
                      "plain_s": math.nan}
        done += 1
        log.info("[%d/%d] %s seed %d: %d invariants violated", done, len(jobs),
                 script.scenario, seed, result.get("distinct_invariants_violated", 0))
        return result

    with ThreadPoolExecutor(workers) as pool:
        calibrating = [control, *[s for s in todo if s.bug is None and s is not control]]
        found = list(pool.map(lambda s: violated_at(s, calibration_seeds, invariants, work),
                              calibrating))
        dropped = {CALIBRATED: found[0], VARIANTS: set().union(*found)}
        results = list(pool.map(traced, jobs))
    runs = pd.DataFrame([{
        "scenario": s.scenario, "seed": seed, "clean": s.bug is None,
        "violated": int(r.get("distinct_invariants_violated", 0)),
        "violated_calibrated": len(violations(r, dropped[CALIBRATED])),
        "violated_calibrated_variants": len(violations(r, dropped[VARIANTS])),
        "first_step": r.get("first_violation_step"),
        "overhead": (r["collect_s"] + r["check_s"]) / r["plain_s"]}
        for (s, seed), r in zip(jobs, results, strict=True)])
    table = pd.DataFrame([row for (s, seed), r in zip(jobs, results, strict=True)
                          for row in run_outcomes(s, seed, r, dropped)])
    table.attrs["dropped"] = {name: len(names) for name, names in dropped.items()}
    return runs, table


def overhead_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Both detectors' cost in ``overhead.csv``'s shape: (trace + check) wall over the plain
    script's wall, median over the traced runs."""
    median = float(runs["overhead"].median())
    return pd.DataFrame([{"model": "mlp", "variant": name, "median_x": median,
                          "mean_x": float(runs["overhead"].mean())}
                         for name in (RAW, CALIBRATED, VARIANTS)])


def _seeds(text: str) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(","))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bugzoo.tools.traincheck",
                                description="Score TrainCheck offline on exported mlp scripts.")
    p.add_argument("--out", required=True, type=Path,
                   help="work folder for scripts, checks and the leaderboard")
    p.add_argument("--steps", type=int,
                   help="cut every script to this many steps (default: as exported, 62 to 400 "
                        "steps, the length each needs to show its symptom)")
    p.add_argument("--check-seeds", type=_seeds, default=(2, 3, 4),
                   help="comma-separated seeds of the scored runs (default 2,3,4)")
    p.add_argument("--workers", type=int, default=2, help="scripts traced at once")
    p.add_argument("--scenarios", nargs="+", help="score only these scripts' scenarios")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runs, table = score_offline(args.out, steps=args.steps, check_seeds=args.check_seeds,
                                workers=args.workers, only=args.scenarios)
    runs.to_csv(args.out / "runs.csv", index=False)
    table.to_csv(args.out / "outcomes.csv", index=False)
    command = " ".join(["python -m bugzoo.tools.traincheck", *sys.argv[1:]])
    print(write_boards(table, overhead_table(runs), args.out, command, [args.out]))
    for name, count in table.attrs["dropped"].items():
        print(f"{name}: {count} invariants dropped by calibration")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
