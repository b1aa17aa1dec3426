"""``bugzoo curves <bug>``: the bug's symptom curves, clean vs buggy, over several seeds.

Each row of a figure is one buggy scenario beside its clean control; the panels are the training
loss, the validation accuracy, the gradient norm and one panel chosen by the bug's symptom
(validation loss, memory, data time, or accuracy against serving-time padding width, ...).
Scenarios whose bug is there from step 0 go into ``<bug>.png``, those that start mid-run into
``<bug>-midrun.png``. Lines are the median over seeds, bands span min..max; a dashed line marks
the onset, a dotted one the first non-finite loss, and a box says where runs crashed or hung.
Runs are shared with ``bugzoo results validate`` (``results/runs/validity``) and reused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bugzoo.bugs import ALL_MODELS, flat_id, get_bug
from bugzoo.commands import command_line
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
CLIP = 1e3  # a panel's axis stops at this many times the clean runs' largest value
TITLE, TEXT, TICKS = 11, 10, 9  # font sizes (pt)


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
        ax.set_xticks(list(x), b.width, fontsize=TICKS)
        data.append(b.drop(columns="order").assign(variant=variant, quantity=PADDING))
    ax.set_xlabel("validation batches padded to", fontsize=TEXT)
    return data


def band(traces: pd.DataFrame, column: str) -> pd.DataFrame:
    """Median, min and max over seeds per step (the loss smoothed over 10 steps first)."""
    values = traces[["seed", "step", column]].dropna().astype({column: float})
    if column == "loss":
        values[column] = values.groupby("seed")[column].transform(
            lambda s: s.rolling(10, min_periods=1).mean())
    return values.groupby("step")[column].agg(["median", "min", "max"]).reset_index()


@dataclass(frozen=True)
class Row:
    """One row of a figure: a buggy scenario's runs beside its clean control's."""

    scenario: str
    onset: int
    clean: pd.DataFrame
    buggy: pd.DataFrame
    padding: tuple[pd.DataFrame, pd.DataFrame]  # serving checks, clean then buggy
    ended: list[tuple[str, int]]  # buggy runs that stopped early: (outcome, steps completed)


def draw(bug_id: str, rows: list[Row], seeds: int, png: Path, command: str) -> pd.DataFrame:
    """Plot every row's panels into ``png``; returns the plotted bands (the data behind the
    figure)."""
    bug = get_bug(bug_id)
    columns = ["loss", "val_acc", "grad_norm", EXTRA_PANEL.get(bug.check.metric, "param_norm")]
    fig = Figure(figsize=(4.6 * len(columns), 3.2 * len(rows) + 1.0))
    axes = fig.subplots(len(rows), len(columns), squeeze=False)
    data = []
    for row, axes_row in zip(rows, axes, strict=True):
        for column, ax in zip(columns, axes_row, strict=True):
            ax.set_title(f"{row.scenario}: {LABELS.get(column, column)}", fontsize=TEXT)
            ax.tick_params(labelsize=TICKS)
            if column == PADDING:
                data += [d.assign(scenario=row.scenario) for d in draw_padding(ax, row.padding)]
                continue
            data += draw_panel(ax, row, column)
            if row.onset:
                ax.axvline(row.onset, color="k", ls="--", lw=1, label="onset")
            mark_nonfinite(ax, row.buggy, seeds)
            ax.set_xlabel("step", fontsize=TEXT)
        mark_ended(axes_row[0], row.ended, seeds)
        axes_row[0].legend(fontsize=TICKS)
    late = " (bugs that start mid-run)" if rows[0].onset else ""
    fig.suptitle(f"{bug.id}: {bug.title}{late}. Median and min-max over {seeds} seeds",
                 fontsize=TITLE + 2)
    fig.text(0.01, 0.005, f"regenerate: {command}", fontsize=TICKS, color="0.35")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    return pd.concat(data, ignore_index=True) if data else pd.DataFrame()


def draw_panel(ax, row: Row, column: str) -> list[pd.DataFrame]:
    """Clean and buggy bands of one trace column; an axis that the buggy runs blow past
    ``CLIP`` times the clean maximum is cut there, and says so."""
    data = []
    for variant, traces in (("clean", row.clean), ("buggy", row.buggy)):
        if traces.empty or column not in traces:
            continue
        b = band(traces, column)
        ax.plot(b.step, b["median"], color=COLOURS[variant], label=variant, lw=1.5,
                marker="o" if column == "val_acc" else None, ms=3)
        ax.fill_between(b.step, b["min"], b["max"], color=COLOURS[variant], alpha=0.2)
        data.append(b.assign(scenario=row.scenario, variant=variant, quantity=column))
    if column in ("grad_norm", "rss_mb", "heap_mb") or (
            column == "loss" and not row.buggy.empty and (row.buggy.loss.dropna() > 0).all()):
        ax.set_yscale("symlog" if column in ("rss_mb", "heap_mb") else "log")
    if len(data) == 2 and column != "val_acc":
        ceiling = CLIP * float(data[0]["max"].max())
        if 0 < ceiling < float(data[1]["max"].max()):
            if ax.get_yscale() == "linear" and (data[0]["min"] > 0).all():
                ax.set_yscale("log")
            ax.set_ylim(top=ceiling)
            ax.text(0.98, 0.03, f"axis cut at {CLIP:g}x the clean maximum",
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=TICKS,
                    color=COLOURS["buggy"])
    return data


def mark_nonfinite(ax, buggy: pd.DataFrame, seeds: int) -> None:
    """A dotted line at the first step where a buggy run's loss is not finite."""
    if buggy.empty or "nonfinite_loss" not in buggy:
        return
    first = buggy[buggy["nonfinite_loss"].astype(bool)].groupby("seed")["step"].min()
    if len(first):
        ax.axvline(first.min(), color=COLOURS["buggy"], ls=":", lw=1.5,
                   label=f"loss not finite ({len(first)} of {seeds} seeds)")


def mark_ended(ax, ended: list[tuple[str, int]], seeds: int) -> None:
    """Say where buggy runs stopped (a crash or a hang leaves no curve after it)."""
    if not ended:
        return
    outcome = ended[0][0]
    steps = sorted({completed for _, completed in ended})
    where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    ax.text(0.5, 0.5, f"buggy runs: {outcome} at {where}\n({len(ended)} of {seeds} seeds)",
            transform=ax.transAxes, ha="center", va="center", fontsize=TEXT,
            color=COLOURS["buggy"], bbox={"facecolor": "white", "edgecolor": COLOURS["buggy"]})


def curves(bug_id: str, models: list[str] | None, patterns: list[str] | None, seeds: list[int],
           runs_root: Path, out: Path, workers: int, overrides: list[str], command: str,
           progress: bool = True) -> list[Path]:
    """Run (or reuse) the bug's scenarios and controls over ``seeds`` and draw them: the
    scenarios whose bug is there from step 0 into ``<bug>.png``, those that start mid-run into
    ``<bug>-midrun.png`` (into ``<bug>.png`` when every one does), each with its data as
    Parquet beside it. Returns the figures."""
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
    rows = [load_row(runs_root, scenario.id, scenario.control, seeds) for scenario in plan.buggy]
    pngs = []
    from_start, midrun = [r for r in rows if not r.onset], [r for r in rows if r.onset]
    # a bug whose every scenario starts mid-run has those in its main figure
    for suffix, group in (("", from_start or midrun), ("-midrun", midrun if from_start else [])):
        if group:
            png = out / f"{flat_id(bug_id)}{suffix}.png"
            draw(bug_id, group, len(seeds), png, command).to_parquet(
                png.with_suffix(".parquet"), index=False)
            pngs.append(png)
    return pngs


def load_row(root: Path, scenario: str, control: str, seeds: list[int]) -> Row:
    """A buggy scenario's stored runs and its control's, as one figure row."""
    summaries = [store.read_summary(store.run_dir(root, "buggy", scenario, s)) for s in seeds]
    return Row(scenario, summaries[0].get("onset") or 0,
               load_traces(root, "control", control, seeds),
               load_traces(root, "buggy", scenario, seeds),
               (load_padding(root, "control", control, seeds),
                load_padding(root, "buggy", scenario, seeds)),
               [(s["outcome"], s.get("steps_completed") or 0) for s in summaries
                if s["outcome"] != "completed"])


# where a figure's files and runs go: its regenerate line names what it draws, not these paths
WHERE_FILES_GO = ("--out", "--runs")


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo curves", description=__doc__.splitlines()[0],
                       parents=[sweep_parser()])
    p.add_argument("bug")
    p.add_argument("overrides", nargs="*", help="run-setting overrides (KEY=VALUE)")
    p.add_argument("--model", dest="models", nargs="+", default=[], metavar="MODEL",
                   help="the models to draw (default: every model the bug applies to)")
    p.add_argument("--runs", default="results/runs/validity")
    p.add_argument("--out", default="results/curves")
    args = p.parse_intermixed_args(argv)
    options = sweep_options(args, VALIDITY_SEEDS)
    get_bug(args.bug)
    models = args.models
    for m in models:
        if m not in ALL_MODELS:
            raise unknown_choice("model", m, ALL_MODELS)
    overrides = args.overrides
    pngs = curves(args.bug, models, options.patterns, options.seeds,
                  store.ensure_writable(Path(args.runs)), Path(args.out), options.workers,
                  overrides, command_line("curves", argv, leave_out=WHERE_FILES_GO), options.progress)
    for png in pngs:
        print(f"wrote {png} and {png.with_suffix('.parquet')}")
    return 0
