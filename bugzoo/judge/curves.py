"""``bugzoo curves <bug>``: the bug's symptom curves, clean vs buggy, over several seeds.

Each row of the figure is one model the bug applies to; the panels are the training loss, the
validation accuracy, the gradient norm and one panel chosen by the bug's symptom (memory, lr,
data time, ...). Lines are the median over seeds, bands span min..max, the dashed line marks the
onset. Runs are shared with ``bugzoo validate`` (``results/runs/validity``) and reused.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bugzoo.bugs import ALL_MODELS, get_bug
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.harness import store
from bugzoo.harness.sweep import sweep, sweep_options, sweep_parser
from bugzoo.judge.validity import VALIDITY_SEEDS, plan_validity_runs
from bugzoo.scenarios import list_scenarios

# symptom metric -> trace column drawn in the fourth panel
EXTRA_PANEL = {
    "rss_growth_mb": "rss_mb", "peak_rss_mb": "rss_mb", "heap_growth_mb": "heap_mb",
    "final_lr": "lr", "max_lr": "lr", "mean_lr": "lr",
    "data_time_frac": "data_s", "median_step_s": "step_s", "mean_zero_grad_frac": "zero_grad_frac",
    "train_mode_frac": "training", "mean_update_ratio": "update_ratio",
}
LABELS = {"loss": "training loss (10-step mean)", "val_acc": "validation accuracy",
          "grad_norm": "global grad norm", "rss_mb": "process RSS (MiB)",
          "heap_mb": "live heap (MiB)", "lr": "learning rate",
          "data_s": "data time per step (s)", "step_s": "step time (s)",
          "zero_grad_frac": "share of zero gradients", "training": "model.training",
          "update_ratio": "update / param norm", "param_norm": "parameter norm"}
COLOURS = {"clean": "#1f77b4", "buggy": "#d62728"}


def load_traces(root: Path, sweep_dir: str, scenario: str, seeds: list[int]) -> pd.DataFrame:
    frames = []
    for seed in seeds:
        path = store.run_dir(root, sweep_dir, scenario, seed)
        if store.is_complete(path) and (path / "trace.parquet").is_file():
            trace = store.read_trace(path)
            if len(trace):
                frames.append(trace.assign(seed=seed))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def band(traces: pd.DataFrame, column: str) -> pd.DataFrame:
    """Median, min and max over seeds per step (the loss smoothed over 10 steps first)."""
    values = traces[["seed", "step", column]].dropna().astype({column: float})
    if column == "loss":
        values[column] = values.groupby("seed")[column].transform(
            lambda s: s.rolling(10, min_periods=1).mean())
    return values.groupby("step")[column].agg(["median", "min", "max"]).reset_index()


def draw(bug_id: str, runs: dict[str, tuple[pd.DataFrame, pd.DataFrame]], onset: dict[str, int],
         out: Path, command: str) -> pd.DataFrame:
    """Plot every model's panels; returns the plotted bands (the data behind the figure)."""
    bug = get_bug(bug_id)
    columns = ["loss", "val_acc", "grad_norm", EXTRA_PANEL.get(bug.check.metric, "param_norm")]
    fig = Figure(figsize=(4.2 * len(columns), 2.8 * len(runs) + 0.8))
    axes = fig.subplots(len(runs), len(columns), squeeze=False)
    data = []
    for row, (model, (clean, buggy)) in enumerate(runs.items()):
        for col, column in enumerate(columns):
            ax = axes[row, col]
            for variant, traces in (("clean", clean), ("buggy", buggy)):
                if traces.empty or column not in traces:
                    continue
                b = band(traces, column)
                ax.plot(b.step, b["median"], color=COLOURS[variant], label=variant, lw=1.4,
                        marker="o" if column == "val_acc" else None, ms=3)
                ax.fill_between(b.step, b["min"], b["max"], color=COLOURS[variant], alpha=0.2)
                data.append(b.assign(model=model, variant=variant, quantity=column))
            if column in ("grad_norm", "rss_mb", "heap_mb") or (column == "loss" and not buggy.empty
                                                     and (buggy.loss.dropna() > 0).all()):
                ax.set_yscale("symlog" if column in ("rss_mb", "heap_mb") else "log")
            if onset.get(model):
                ax.axvline(onset[model], color="k", ls="--", lw=1, label="onset")
            ax.set_title(f"{model}: {LABELS.get(column, column)}", fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[row, 0].legend(fontsize=7)
    fig.suptitle(f"{bug.id} — {bug.title}  (median and min–max over seeds)", fontsize=11)
    fig.text(0.01, 0.005, f"regenerate: {command}", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{bug_id}.png", dpi=90)
    return pd.concat(data, ignore_index=True) if data else pd.DataFrame()


def curves(bug_id: str, models: list[str] | None, patterns: list[str] | None, seeds: list[int],
           runs_root: Path, out: Path, workers: int, overrides: list[str], command: str,
           progress: bool = True) -> Path:
    bug = get_bug(bug_id)
    chosen = [m for m in bug.models if not models or m in models]
    if models and not chosen:
        raise UsageError(f"bug '{bug_id}' does not apply to model(s) {', '.join(models)} "
                         f"(it applies to: {', '.join(bug.models)})")
    ids = [s.id for s in list_scenarios(patterns) if s.bug == bug_id and s.model in chosen]
    if not ids:
        raise UsageError(f"bug '{bug_id}' has no runnable scenario here")
    # excluded scenarios are drawn too: the picture shows what "does not manifest" looks like
    plan = plan_validity_runs(runs_root, ids, seeds, overrides)
    sweep(plan.tasks, workers, progress=progress)
    runs, onset = {}, {}
    for scenario in plan.buggy:
        buggy = load_traces(runs_root, "buggy", scenario.id, seeds)
        runs[scenario.model] = (load_traces(runs_root, "control", scenario.control, seeds), buggy)
        summary = store.read_summary(store.run_dir(runs_root, "buggy", scenario.id, seeds[0]))
        onset[scenario.model] = summary.get("onset") or 0
    data = draw(bug_id, runs, onset, out, command)
    data.to_parquet(out / f"{bug_id}.parquet", index=False)
    return out / f"{bug_id}.png"


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo curves", description=__doc__.splitlines()[0],
                       parents=[sweep_parser()])
    p.add_argument("bug")
    p.add_argument("overrides", nargs="*",
                   help="model=M to pick models (repeatable), or run-setting overrides")
    p.add_argument("--runs", default="results/runs/validity")
    p.add_argument("--out", default="results/curves")
    args = p.parse_intermixed_args(argv)
    options = sweep_options(args, VALIDITY_SEEDS)
    get_bug(args.bug)
    models = [o.split("=", 1)[1] for o in args.overrides if o.startswith("model=")]
    for m in models:
        if m not in ALL_MODELS:
            raise unknown_choice("model", m, ALL_MODELS)
    overrides = [o for o in args.overrides if not o.startswith("model=")]
    png = curves(args.bug, models, options.patterns, options.seeds,
                 store.ensure_writable(Path(args.runs)), Path(args.out), options.workers,
                 overrides, " ".join(["bugzoo curves", *argv]), options.progress)
    print(f"wrote {png} and {png.with_suffix('.parquet')}")
    return 0
