"""``bugzoo results gpu``: the GPU pass, what a CUDA machine shows that a CPU one cannot.

Stages, most valuable first (``STAGES``): the machine's facts; ``device_mismatch``'s validity
and curves; the precision bugs in real half precision beside their GradScaler controls;
bugzoo-bench Lite on a fresh test split, its traces scored sealed; detector overhead; the whole
catalogue at one seed with the default suite, beside the CPU reference runs; the data-time
share of ``dataloader_bottleneck``; one seed of the clean scenarios trained twice, with and
without deterministic kernels; the quick bench; and one seed of the whole catalogue trained
twice, to find the traces that differ. ``--budget-s`` (480 s by default, what a GPU loan
leaves) starts only the stages whose planned time, scaled to the cores it finds, still fits,
and names the others for the next pass.

Each stage writes ``<out>/<stage>.md`` (and tables beside it), each naming the device, the torch
version and the commands that made it. A stage whose ``.md`` is there is skipped, so a pass cut
off by the end of a GPU lease resumes where it stopped. Runs go under ``--runs`` and are reused.

``--dry-run`` runs every stage on the CPU with tiny settings: the same code and the same files,
so that a typo or a missing package shows up here, before a GPU machine is lent.
``python3 -m bugzoo.judge.gpu_setup`` installs the carried wheels on a machine without a
package registry, then starts this pass.
"""

from __future__ import annotations

import logging
import os
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from bugzoo import __version__
from bugzoo.bugs import get_bug
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.harness import store
from bugzoo.harness.sweep import plan_runs, run_timeout, select_scenarios, sweep
from bugzoo.judge import bench, curves, perf, validity
from bugzoo.judge.tables import markdown
from bugzoo.scenarios import get_scenario

log = logging.getLogger(__name__)

BUDGET_S = 480.0  # what a GPU loan leaves for the pass
CPU_REFERENCE = Path("results/traces/runs.parquet")  # the published CPU runs, seeds 0-2
DRY_OVERRIDES = ("harness.device=cpu", "harness.steps=20", "harness.eval_interval=10")
# a dry run's benches: two detectors stand in for the suite (the same code path, a tenth of the
# time; the overhead stage times the detectors)
DRY_DETECTORS = ("--detectors", "nonfinite", "loss_plateau")


@dataclass(frozen=True)
class Pass:
    """One GPU pass: where its files and runs go, and whether it is a dry run on the CPU."""

    out: Path
    runs: Path
    dry: bool
    workers: int
    command: str  # the pass's own command line, as every file quotes it
    ran: list[str] = field(default_factory=list)  # the verbs the current stage ran

    @property
    def overrides(self) -> list[str]:
        return list(DRY_OVERRIDES) if self.dry else []

    @property
    def seeds(self) -> str:
        """Seeds of a statistical test: 5 (the validity floor of p = 1/252), 2 in a dry run."""
        return "0,1" if self.dry else validity.VALIDITY_SEEDS

    def verb(self, name: str, main: Callable[[list[str]], int], argv: list[str]) -> None:
        """Run ``bugzoo <name> <argv>`` in this process, noting its command line."""
        command = command_line(name, argv)
        log.info("  %s", command)
        self.ran.append(command)
        if status := main(argv):
            raise RuntimeError(f"{command} exited with {status}")

    def sweep_args(self, runs: Path) -> list[str]:
        return ["--runs" if runs.name == "validity" else "--out", str(runs),
                "--workers", str(self.workers), "--no-progress"]


def device_name() -> str:
    """The accelerator's name, or the CPU's."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.machine()}, {os.cpu_count()} cores)"


def header(p: Pass, title: str, note: str = "") -> list[str]:
    """A stage file's head: the device, the versions and the commands that made it."""
    lines = [f"# GPU pass: {title}", ""]
    if p.dry:
        lines += ["**Dry run on the CPU with tiny settings: it proves the pass runs, and "
                  "measures nothing about a GPU.**", ""]
    lines += [f"Device: {device_name()}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
              f"bugzoo {__version__}; Python {platform.python_version()}.", "",
              f"Made by `{p.command}`, which ran:", "",
              *[f"    {c}" for c in p.ran], ""]
    return lines + ([note, ""] if note else [])


def stamped(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the device and torch version as its first columns."""
    return table.assign(device=device_name(), torch=torch.__version__)[
        ["device", "torch", *table.columns]]


def write_stage(p: Pass, name: str, title: str, sections: list[str], note: str = "",
                tables: dict[str, pd.DataFrame] | None = None) -> None:
    """Write the stage's tables (``<name>.csv``-like, stamped), then its ``.md``, which marks the
    stage done."""
    for stem, table in (tables or {}).items():
        stamped(table).to_csv(p.out / f"{stem}.csv", index=False)
    text = "\n".join([*header(p, title, note), *sections]).rstrip() + "\n"
    (p.out / f"{name}.md").write_text(text)


def demoted(markdown_text: str) -> list[str]:
    """A Markdown document's lines with every heading one level deeper, to nest it."""
    return [f"#{line}" if line.startswith("#") else line for line in markdown_text.splitlines()]


def summaries(sweep_dir: Path) -> pd.DataFrame:
    """One row per complete run under a sweep folder, buggy runs' disarmed twins included
    (an exclusive detector's own runs left out): its summary."""
    return pd.DataFrame([store.read_summary(path) for path in store.iter_runs(sweep_dir)
                         if "." not in path.name or path.name.endswith(".control")])


# ----------------------------------------------------------------------------- stages
def environment(p: Pass) -> None:
    facts = {"device": device_name(), "torch": torch.__version__,
             "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
             "python": platform.python_version(), "bugzoo": __version__,
             "cpu_cores": os.cpu_count(), "dry_run": p.dry}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        facts.update(gpu_memory_gib=round(props.total_memory / 2**30, 1),
                     compute_capability=f"{props.major}.{props.minor}",
                     multiprocessors=props.multi_processor_count)
    table = pd.DataFrame([{"fact": k, "value": str(v)} for k, v in facts.items()])
    write_stage(p, "environment", "the machine", [markdown(table)])


def quick(p: Pass) -> None:
    runs = p.runs / "quick"
    # a dry run leaves the overhead timing to its own stage
    scenarios = (["--scenarios", "mlp-double_softmax", "mlp-clean-lr_x0p3", "--no-overhead",
                  *DRY_DETECTORS] if p.dry else [])
    p.verb("bench", bench.main, ["--quick", *scenarios, *p.sweep_args(runs), *p.overrides])
    board = pd.read_csv(runs / "leaderboard.csv")
    write_stage(p, "quick", "the quick bench on CUDA",
                demoted((runs / "leaderboard.md").read_text()), tables={"quick": board})


def lite(p: Pass) -> None:
    runs = p.runs / "lite"
    # the 2.0 board as a plain bench makes it: a fresh test split, traces collected once and
    # the sealed detectors scored outside the runs; a dry run on two mlp scenarios
    scenarios = (["--split", "test", "--scenarios", "mlp-double_softmax", "mlp-clean-lr_x0p3",
                  "--no-overhead", *DRY_DETECTORS] if p.dry else [])
    p.verb("bench", bench.main, [*scenarios, *p.sweep_args(runs), *p.overrides])
    board = pd.read_csv(runs / "leaderboard.csv")
    write_stage(p, "lite", "bugzoo-bench Lite on CUDA, scored sealed",
                demoted((runs / "leaderboard.md").read_text()), tables={"lite": board})


def catalogue(p: Pass) -> None:
    runs = p.runs / "catalogue"
    scenarios = (["--scenarios", "mlp-double_softmax", "mlp-lr_too_high", "lstm-frozen_layers",
                  *DRY_DETECTORS] if p.dry else [])
    p.verb("bench", bench.main, ["--seeds", "0", "--no-overhead", *scenarios,
                                 *p.sweep_args(runs), *p.overrides])
    compared = beside_cpu(summaries(runs), pd.read_parquet(CPU_REFERENCE))
    counts = compared["agreement"].value_counts()
    differ = compared[compared["agreement"] == "differs"]
    note = ("Each buggy scenario at seed 0: its bug's declared symptom metric on the buggy run "
            "and on its matched control, on CUDA and in the published CPU runs "
            f"(`{CPU_REFERENCE}`). `shows` is a sign check on one seed (the buggy run moved the "
            "declared way), not a test: `precision.md`, `device_mismatch.md` and "
            "`data_time.md` test the bugs whose behaviour depends on the device over 5 seeds. "
            "An unproven scenario is one whose symptom the CPU runs did not prove, so "
            "its sign on one seed is noise.")
    summary = (f"**Of {len(compared)} buggy scenarios, the sign check agrees between CUDA and "
               f"the CPU for {counts.get('same', 0)} and differs for {len(differ)} "
               f"({int(differ['unproven'].sum())} of them unproven); "
               f"{counts.get('needs CUDA', 0)} need CUDA and have no CPU run; "
               f"{counts.get('needs two runs', 0)} have a symptom that one run cannot show "
               "(two runs of a seed that differ).**")
    columns = ["scenario", "unproven", "metric", "direction", "cpu_buggy", "cpu_control",
               "cpu_shows", "cuda_buggy", "cuda_control", "cuda_shows", "cpu_outcome",
               "cuda_outcome"]
    sections = [summary, "", "## Where CUDA and the CPU differ", "",
                markdown(differ[columns].round(4)) if len(differ) else "Nowhere.", "",
                *demoted((runs / "leaderboard.md").read_text())]
    write_stage(p, "catalogue", "the whole catalogue at seed 0", sections, note,
                tables={"catalogue": compared,
                        "catalogue_leaderboard": pd.read_csv(runs / "leaderboard.csv")})


def shows(direction: str, buggy, control) -> bool | None:
    """Whether one buggy run moved its symptom metric the declared way from its control
    (a sign check); ``None`` where one run cannot tell ("varies" needs two runs of a seed)."""
    if direction == "varies":
        return None
    if direction == "event":
        return bool(buggy) and not bool(control)
    missing = [v is None or v != v for v in (buggy, control)]
    if missing[0] or missing[1]:  # no value: a run that crashed before it was measured
        return missing[0] and not missing[1]
    return buggy > control if direction == "higher" else buggy < control


def beside_cpu(cuda: pd.DataFrame, cpu: pd.DataFrame) -> pd.DataFrame:
    """Per buggy scenario at seed 0, its symptom metric on CUDA beside the CPU reference, each
    buggy run against its disarmed twin (``role`` control) of the same platform."""
    rows = []
    for platform_name, runs in (("cuda", cuda), ("cpu", cpu)):
        first = runs[runs["seed"] == 0]
        twins = first[first["role"] == "control"].set_index("scenario")
        for run in first[first["role"] == "buggy"].itertuples():
            scenario = get_scenario(run.scenario)
            check = get_bug(scenario.bug).check
            buggy = getattr(run, check.metric, None)
            control = (twins.loc[run.scenario].get(check.metric)
                       if run.scenario in twins.index else None)
            rows.append({"platform": platform_name, "scenario": run.scenario,
                         "bug": scenario.bug, "model": scenario.model,
                         "metric": check.metric, "direction": check.direction,
                         "buggy": buggy, "control": control,
                         "shows": shows(check.direction, buggy, control),
                         "outcome": run.outcome})
    both = pd.DataFrame(rows).pivot(index=["scenario", "bug", "model", "metric", "direction"],
                                    columns="platform",
                                    values=["buggy", "control", "shows", "outcome"])
    both.columns = [f"{platform_name}_{quantity}" for quantity, platform_name in both.columns]
    both = both.reset_index().dropna(subset=["cuda_outcome"])
    both.insert(1, "unproven", [bool(get_scenario(s).unproven) for s in both["scenario"]])
    both["agreement"] = [
        "needs two runs" if r.direction == "varies" else "needs CUDA" if pd.isna(r.cpu_outcome)
        else "same" if r.cpu_shows == r.cuda_shows else "differs" for r in both.itertuples()]
    return both


def validated(p: Pass, name: str, patterns: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``bugzoo results validate`` on ``patterns`` over the pass's seeds: its validity and health
    tables."""
    tables = p.runs / f"{name}-tables"
    p.verb("validate", validity.main, ["--scenarios", *patterns, "--seeds", p.seeds,
                                       "--out", str(tables), *p.sweep_args(p.runs / "validity"),
                                       *p.overrides])
    health = tables / "health.csv"
    return (pd.read_csv(tables / "validity.csv"),
            pd.read_csv(health) if health.stat().st_size > 1 else pd.DataFrame())


VALIDITY_COLUMNS = ["scenario", "metric", "direction", "control", "effect", "effect_lo",
                    "effect_hi", "p_value", "q_value", "valid"]


def device_mismatch(p: Pass) -> None:
    # a dry run has no device to mismatch: a bug that crashes on the CPU stands in
    bug = "inplace_op_autograd" if p.dry else "device_mismatch"
    pattern = f"{'mlp' if p.dry else '*'}-{bug}"
    table, _ = validated(p, "device_mismatch", [pattern])
    p.verb("curves", curves.main, [bug, "--scenarios", pattern, "--seeds", p.seeds,
                                   "--out", str(p.out), *p.sweep_args(p.runs / "validity"),
                                   *p.overrides])
    for suffix in (".png", ".parquet"):  # the figure under the stage's name
        (p.out / f"{bug}{suffix}").replace(p.out / f"device_mismatch{suffix}")
    note = (f"`{bug}` against its clean control over seeds {p.seeds}: the crash as an event "
            "(Fisher's exact test), and its curves in `device_mismatch.png`.")
    write_stage(p, "device_mismatch", "device_mismatch on CUDA",
                [markdown(table[VALIDITY_COLUMNS].round(4)), "",
                 "![device_mismatch curves](device_mismatch.png)"], note,
                tables={"device_mismatch": table})


PRECISION_SCENARIOS = ["mlp-fp16_no_scaler", "mlp-adam_eps_fp16", "*-clean-bf16"]


def precision(p: Pass) -> None:
    table, health = validated(p, "precision", [s.replace("*", "mlp") for s in
                                               PRECISION_SCENARIOS] if p.dry else
                              PRECISION_SCENARIOS)
    mechanism = half_precision_runs(p.runs / "validity", p.seeds)
    note = ("float16 autocast without a GradScaler against the same with one "
            "(`mlp-fp16_no_scaler` against `mlp-clean-fp16_scaler`), float16 weights with "
            "Adam's eps=1e-8 against float32 ones (`mlp-adam_eps_fp16`), and bfloat16 autocast "
            f"beside each model's float32 default, over seeds {p.seeds}. On CUDA these are "
            "real half-precision kernels.")
    sections = ["## Symptom tests", "", markdown(table[VALIDITY_COLUMNS].round(4)), "",
                "## Why: flushed gradients and skipped steps, per run", "",
                "`zero_grad_frac`: the mean share of gradient entries exactly 0; "
                "`skipped_steps`: steps whose loss scale fell (the GradScaler found inf/NaN "
                "gradients and skipped the update).", "", markdown(mechanism.round(5))]
    if len(health):
        sections += ["", "## bfloat16 health", "",
                     markdown(health[["scenario", "mean_val_acc", "min_val_acc",
                                      "default_val_acc", "healthy"]].round(4))]
    write_stage(p, "precision", "precision bugs in half precision", sections, note,
                tables={"precision": table, "precision_runs": mechanism})


def half_precision_runs(root: Path, seeds: str) -> pd.DataFrame:
    """Per fp16 run (buggy and GradScaler control): outcome, final validation loss, share of
    zero gradient entries, and the steps its GradScaler skipped."""
    rows = []
    for kind, scenario in (("buggy", "mlp-fp16_no_scaler"), ("control", "mlp-clean-fp16_scaler")):
        for seed in map(int, seeds.split(",")):
            path = store.run_dir(root, kind, scenario, seed)
            summary, trace = store.read_summary(path), store.read_trace(path)
            scale = trace["scale"].dropna()
            rows.append({"scenario": scenario, "seed": seed, "outcome": summary["outcome"],
                         "final_val_loss": summary.get("final_val_loss"),
                         "zero_grad_frac": summary.get("mean_zero_grad_frac"),
                         "skipped_steps": int((scale.diff() < 0).sum())})
    return pd.DataFrame(rows)


def data_time(p: Pass) -> None:
    table, _ = validated(p, "data_time", [f"{'mlp' if p.dry else '*'}-dataloader_bottleneck"])
    root, seeds = p.runs / "validity", list(map(int, p.seeds.split(",")))
    rows = []
    for r in table.itertuples():
        buggy = validity.read_metric(root, "buggy", r.scenario, seeds, "data_time_frac")
        clean = validity.read_metric(root, "control", r.control, seeds, "data_time_frac")
        step = [validity.read_metric(root, kind, s, seeds, "median_step_s")
                for kind, s in (("buggy", r.scenario), ("control", r.control))]
        rows.append({"scenario": r.scenario, "data_share_buggy": pd.Series(buggy).median(),
                     "data_share_clean": pd.Series(clean).median(),
                     "step_ms_buggy": 1000 * pd.Series(step[0]).median(),
                     "step_ms_clean": 1000 * pd.Series(step[1]).median(),
                     "effect": r.effect, "q_value": r.q_value, "valid": r.valid})
    shares = pd.DataFrame(rows)
    cpu = pd.read_csv("results/validity.csv").set_index("scenario")["effect"]
    shares["cpu_effect"] = shares["scenario"].map(cpu)
    note = ("The share of each step's time spent waiting for its batch (median over seeds "
            f"{p.seeds}), buggy (per-sample parsing in the loader) against the clean loader, "
            "and the effect on the published CPU runs (`results/validity.csv`).")
    write_stage(p, "data_time", "dataloader_bottleneck's data-time share",
                [markdown(shares.round(4))], note, tables={"data_time": shares})


def overhead(p: Pass) -> None:
    tables = p.runs / "overhead-tables"
    limited = ["--model", "mlp", *DRY_DETECTORS] if p.dry else []
    # timing pairs share the GPU: fewer at once keeps one pair's blocks from slowing another's
    workers = str(max(1, min(p.workers, 4)))
    p.verb("perf", perf.main, ["overhead", "--out", str(tables), "--workers", workers,
                               *limited])
    table = pd.read_csv(tables / "overhead.csv")
    write_stage(p, "overhead", "detector overhead on CUDA",
                demoted((tables / "overhead.md").read_text()), tables={"overhead": table})


DETERMINISM_SCENARIOS = ["*-clean", "*-clean-bf16", "mlp-clean-fp16_scaler"]


def determinism(p: Pass) -> None:
    scenarios = select_scenarios(["mlp-clean"] if p.dry else DETERMINISM_SCENARIOS)
    runs, tasks = {}, []
    for deterministic in (False, True):
        overrides = [*p.overrides, f"harness.deterministic={str(deterministic).lower()}"]
        for repeat in ("first", "second"):
            out = p.runs / "determinism" / f"deterministic-{deterministic}-{repeat}"
            tasks += plan_runs(scenarios, [0], overrides, [], out, run_timeout(scenarios,
                                                                               overrides))
            runs[deterministic, repeat] = out
            p.ran.append(f"(in process) seed 0 of {len(scenarios)} clean scenarios, "
                         f"{' '.join(overrides)} -> {out}")
    sweep(tasks, p.workers, progress=False)  # one sweep: its workers start once, not four times
    table = pd.DataFrame([same_seed_twice(s.id, deterministic, runs[deterministic, "first"],
                                          runs[deterministic, "second"])
                          for deterministic in (False, True) for s in scenarios])
    note = ("Each clean scenario trained twice at seed 0, with torch's default kernels and "
            "with `harness.deterministic=true` (`torch.use_deterministic_algorithms`, "
            "`CUBLAS_WORKSPACE_CONFIG=:4096:8`). `identical`: the two traces are bitwise equal; "
            "`max_loss_diff`: the largest gap between their per-step training losses.")
    write_stage(p, "determinism", "one seed twice, with and without deterministic kernels",
                [markdown(table.round(8))], note, tables={"determinism": table})


def same_seed_twice(scenario: str, deterministic: bool, first: Path, second: Path) -> dict:
    """How two runs of one scenario and seed differ."""
    paths = [store.run_dir(root.parent, root.name, scenario, 0) for root in (first, second)]
    summaries_ = [store.read_summary(path) for path in paths]
    traces = [store.read_trace(path) for path in paths]
    losses = [t["loss"] if "loss" in t else pd.Series(dtype=float) for t in traces]  # none: a crash
    gap = (losses[0] - losses[1]).abs()
    differs = gap[gap > 0]
    return {"scenario": scenario, "deterministic": deterministic,
            "outcomes": "/".join(s["outcome"] for s in summaries_),
            "identical": summaries_[0].get("trace_digest") == summaries_[1].get("trace_digest"),
            "max_loss_diff": float(gap.max()) if len(gap) else None,
            "first_differing_step": int(traces[0]["step"][differs.index[0]])
            if len(differs) else None,
            "error": summaries_[0].get("error")}


def repeat(p: Pass) -> None:
    scenarios = select_scenarios(["mlp-double_softmax", "mlp-clean"] if p.dry else None)
    runs = [p.runs / "repeat" / name for name in ("first", "second")]
    tasks = []
    for out in runs:
        tasks += plan_runs(scenarios, [0], p.overrides, [], out,
                           run_timeout(scenarios, p.overrides))
        p.ran.append(f"(in process) seed 0 of {len(scenarios)} scenarios, no detectors, "
                     f"{' '.join(p.overrides) or 'default settings'} -> {out}")
    sweep(tasks, p.workers, progress=False)  # both passes in one sweep: workers start once
    table = pd.DataFrame([same_seed_twice(s.id, False, *runs) for s in scenarios])
    differ = table[~table["identical"]]
    note = ("Every scenario of the default sweep trained twice at seed 0 with torch's default "
            "kernels and no detectors watching. `identical`: the two traces are bitwise equal; "
            "`max_loss_diff`: the largest gap between their per-step training losses.")
    sections = [f"**{len(table) - len(differ)} of {len(table)} scenarios made the same trace "
                f"twice; {len(differ)} did not.**", "", "## The traces that differ", "",
                markdown(differ.drop(columns="deterministic").round(8))
                if len(differ) else "None."]
    write_stage(p, "repeat", "the catalogue at one seed, twice", sections, note,
                tables={"repeat": table})


@dataclass(frozen=True)
class Stage:
    """One stage of the pass and what it is planned to take: minutes on a 16-core GPU machine
    (its CPU-bound share, most of it, scales with the cores found), and seconds as a dry run
    (measured on 2 cores, with a margin)."""

    make: Callable[[Pass], None]
    gpu_minutes: float
    dry_s: float


# the stages, most valuable first: what only a GPU shows, then the 2.0 board on it, then its
# costs, then the comparisons with the CPU
STAGES: dict[str, Stage] = {
    "environment": Stage(environment, 0.2, 1),
    "device_mismatch": Stage(device_mismatch, 1.5, 15),
    "precision": Stage(precision, 1.5, 5),
    "lite": Stage(lite, 3.0, 10),
    "overhead": Stage(overhead, 6.0, 5),
    "catalogue": Stage(catalogue, 8.0, 10),
    "data_time": Stage(data_time, 2.0, 5),
    "determinism": Stage(determinism, 1.5, 5),
    "quick": Stage(quick, 1.0, 10),
    "repeat": Stage(repeat, 5.0, 5),
}
PLANNED_CORES = 16  # the machine the stages' minutes were planned on (an H100 with 16 cores)


def planned_s(name: str, dry: bool, cores: int) -> float:
    """How long stage ``name`` is planned to take here: its dry seconds, or its GPU minutes
    scaled to ``cores``."""
    stage = STAGES[name]
    return stage.dry_s if dry else stage.gpu_minutes * 60 * max(1.0, PLANNED_CORES / cores)


def run_pass(p: Pass, stages: list[str], budget_s: float) -> tuple[list[str], list[str]]:
    """Run the ``stages`` not done yet, in order, each only if its planned time on this
    machine fits in what is left of ``budget_s``; returns the stages that failed and those
    left for a later pass."""
    p.out.mkdir(parents=True, exist_ok=True)
    start, failed, left_over = time.monotonic(), [], []
    for name in stages:
        planned = planned_s(name, p.dry, os.cpu_count() or 1)
        left = budget_s - (time.monotonic() - start)
        if (p.out / f"{name}.md").is_file():
            log.info("gpu pass: %s done already (%s)", name, p.out / f"{name}.md")
            continue
        if planned > left:
            log.info("gpu pass: %s not started: planned %.1f min, %.1f min left", name,
                     planned / 60, left / 60)
            left_over.append(name)
            continue
        log.info("gpu pass: %s (planned %.1f min, %.1f min left)", name, planned / 60,
                 left / 60)
        began = time.monotonic()
        p.ran.clear()
        try:
            STAGES[name].make(p)
        except Exception:  # one stage's failure must not cost the others their lease time
            log.error("gpu pass: %s FAILED\n%s", name, traceback.format_exc())
            failed.append(name)
            continue
        log.info("gpu pass: %s done in %.1f min", name, (time.monotonic() - began) / 60)
    return failed, left_over


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results gpu", description=__doc__.splitlines()[0])
    p.add_argument("--stages", nargs="+", metavar="STAGE",
                   help=f"stages to run, in the pass's order (default: all: {', '.join(STAGES)})")
    p.add_argument("--dry-run", action="store_true",
                   help="every stage on the CPU with tiny settings (checks the pass, measures "
                   "nothing)")
    p.add_argument("--out", help="where the stage files go (default: results/gpu, or "
                   "results/runs/gpu-dry/files with --dry-run)")
    p.add_argument("--runs", help="where the runs go (default: results/runs/gpu, or "
                   "results/runs/gpu-dry with --dry-run)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="runs in parallel (default: one per CPU)")
    p.add_argument("--budget-s", "--time-limit-s", dest="budget_s", type=float,
                   default=BUDGET_S,
                   help="start no stage whose planned time on this machine no longer fits in "
                   f"this many seconds (default: {BUDGET_S:.0f}, a GPU loan's 15 minutes less "
                   "its start and the hand-back)")
    p.add_argument("--redo", action="store_true",
                   help="make the stages' files again, even where they are there (runs already "
                   "stored under --runs are reused; delete that folder to train them again)")
    args = p.parse_args(argv)
    for name in args.stages or ():
        if name not in STAGES:
            raise unknown_choice("stage", name, STAGES)
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if not args.dry_run and not torch.cuda.is_available():
        raise UsageError("no CUDA device here: the GPU pass needs one (--dry-run checks the "
                         "pass on the CPU)")
    runs = Path(args.runs or ("results/runs/gpu-dry" if args.dry_run else "results/runs/gpu"))
    out = Path(args.out or (runs / "files" if args.dry_run else "results/gpu"))
    stages = [s for s in STAGES if s in (args.stages or STAGES)]
    gpu_pass = Pass(store.ensure_writable(out), store.ensure_writable(runs), args.dry_run,
                    args.workers, command_line("results gpu", argv))
    if args.redo:
        for name in stages:
            (out / f"{name}.md").unlink(missing_ok=True)
    failed, left_over = run_pass(gpu_pass, stages, args.budget_s)
    done = [s for s in stages if (out / f"{s}.md").is_file()]
    print(f"gpu pass: {len(done)} of {len(stages)} stages done -> {out}"
          + (f"; failed: {', '.join(failed)}" if failed else "")
          + (f"; left for the next pass (they did not fit): {', '.join(left_over)}"
             if left_over else ""))
    return 1 if failed else 0
