"""``bugzoo curves <bug>``: the bug's symptom curves, clean vs buggy, over several seeds.

Each row of the figure is one model the bug applies to; the panels are the training loss, the
validation accuracy, the gradient norm and one panel chosen by the bug's symptom (validation
loss, memory, data time, or accuracy against serving-time padding width, ...). Lines are the
median over seeds, bands span min..max, the dashed line marks the onset. Runs are shared with ``bugzoo validate`` (``results/runs/validity``) and reused.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bugzoo.bugs import ALL_MODELS, flat_id, get_bug
from bugzoo.errors import ArgumentParser, UsageError, unknown_choice
from bugzoo.harness import store
from bugzoo.harness.sweep import sweep, sweep_options, sweep_parser
from bugzoo.judge.validity import VALIDITY_SEEDS, plan_validity_runs
from bugzoo.scenarios import list_scenarios

PADDING = "padding"  # the serving check of each run's summary, not a trace column
# symptom metric -> trace column drawn in the fourth panel
EXTRA_PANEL = {
    "final_val_loss": "val_loss", "peak_rss_mb": "rss_mb", "heap_growth_mb": "heap_mb",
    "data_time_frac": "data_s", "median_step_s": "step_s", "serving_gap": PADDING,
}
LABELS = {"loss": "training loss (10-step mean)", "val_acc": "validation accuracy",
          "val_loss": "validation loss", "grad_norm": "global grad norm",
          "rss_mb": "process RSS (MiB)", "heap_mb": "live heap (MiB)",
          "data_s": "data time per step (s)", "step_s": "step time (s)",
          "param_norm": "parameter norm", PADDING: "val accuracy by padding width"}
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


def load_padding(root: Path, sweep_dir: str, scenario: str, seeds: list[int]) -> pd.DataFrame:
    """The serving check of each completed run: validation accuracy per padding width."""
    rows = []
    for seed in seeds:
        path = store.run_dir(root, sweep_dir, scenario, seed)
        if store.is_complete(path):
            for point in store.read_summary(path).get("padding") or []:
                width = point["width"]
                rows.append({"seed": seed, "width": "as trained" if width is None else str(width),
                             "order": width or 0, "val_acc": point["acc"]})
    return pd.DataFrame(rows)


def draw_padding(ax, padding: tuple[pd.DataFrame, pd.DataFrame]) -> list[pd.DataFrame]:
    """Accuracy of the same validation reviews as trained and padded wider, clean vs buggy: the
    median bold, each seed's model a thin line."""
    data = []
    for variant, points in zip(("clean", "buggy"), padding, strict=True):
        if points.empty:
            continue
        b = (points.groupby(["order", "width"]).val_acc.agg(["median", "min", "max"])
             .reset_index().sort_values("order"))
        x = range(len(b))
        ax.plot(x, b["median"], color=COLOURS[variant], label=variant, lw=1.8, marker="o", ms=3)
        for _, seed in points.sort_values("order").groupby("seed"):  # each seed is paired
            ax.plot(x, seed.val_acc, color=COLOURS[variant], lw=0.7, alpha=0.45)
        ax.set_xticks(list(x), b.width, fontsize=7)
        data.append(b.drop(columns="order").assign(variant=variant, quantity=PADDING))
    ax.set_xlabel("validation batches padded to", fontsize=8)
    return data


def band(traces: pd.DataFrame, column: str) -> pd.DataFrame:
    """Median, min and max over seeds per step (the loss smoothed over 10 steps first)."""
    values = traces[["seed", "step", column]].dropna().astype({column: float})
    if column == "loss":
        values[column] = values.groupby("seed")[column].transform(
            lambda s: s.rolling(10, min_periods=1).mean())
    return values.groupby("step")[column].agg(["median", "min", "max"]).reset_index()


def draw(bug_id: str, runs: dict[str, tuple[pd.DataFrame, pd.DataFrame]], onset: dict[str, int],
         out: Path, command: str,
         padding: dict[str, tuple[pd.DataFrame, pd.DataFrame]] | None = None) -> pd.DataFrame:
    """Plot every model's panels; returns the plotted bands (the data behind the figure).
    ``padding`` holds each model's serving checks (clean, buggy) for the padding panel."""
    bug = get_bug(bug_id)
    columns = ["loss", "val_acc", "grad_norm", EXTRA_PANEL.get(bug.check.metric, "param_norm")]
    fig = Figure(figsize=(4.2 * len(columns), 2.8 * len(runs) + 0.8))
    axes = fig.subplots(len(runs), len(columns), squeeze=False)
    data = []
    for row, (model, (clean, buggy)) in enumerate(runs.items()):
        for col, column in enumerate(columns):
            ax = axes[row, col]
            ax.set_title(f"{model}: {LABELS.get(column, column)}", fontsize=9)
            ax.tick_params(labelsize=7)
            if column == PADDING:
                data += [d.assign(model=model) for d in draw_padding(ax, padding[model])]
                continue
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
            ax.set_xlabel("step", fontsize=8)
        axes[row, 0].legend(fontsize=7)
    fig.suptitle(f"{bug.id} — {bug.title}  (median and min–max over seeds)", fontsize=11)
    fig.text(0.01, 0.005, f"regenerate: {command}", fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{flat_id(bug_id)}.png", dpi=90)
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
    runs, onset, padding = {}, {}, {}
    for scenario in plan.buggy:
        buggy = load_traces(runs_root, "buggy", scenario.id, seeds)
        runs[scenario.model] = (load_traces(runs_root, "control", scenario.control, seeds), buggy)
        padding[scenario.model] = (load_padding(runs_root, "control", scenario.control, seeds),
                                   load_padding(runs_root, "buggy", scenario.id, seeds))
        summary = store.read_summary(store.run_dir(runs_root, "buggy", scenario.id, seeds[0]))
        onset[scenario.model] = summary.get("onset") or 0
    data = draw(bug_id, runs, onset, out, command, padding)
    png = out / f"{flat_id(bug_id)}.png"
    data.to_parquet(png.with_suffix(".parquet"), index=False)
    return png


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
