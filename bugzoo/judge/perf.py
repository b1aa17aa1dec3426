"""``bugzoo results perf``: speed figures, measured as ratios within one process.

* ``baselines`` — per model, one clean run on its defaults: initial loss vs log(C), single-batch
  overfit, val and holdout accuracy, and the wall time (median of 3).
* ``overhead`` — per model, median step time of the instrumented loop (telemetry), of the loop
  with each detector watching alone, and with the whole suite watching, each relative to the
  bare loop; blocks are interleaved so machine noise hits every variant alike.
* ``sweep`` — sweep efficiency: the same detector-free sweep (one seed) run serially and then
  on every core; (sum of serial run times / workers) / parallel sweep wall time.
* ``profile`` — where a bench's sweep spends its time: each phase of a run, the pool's slots
  held and idle, and telemetry's parts per step on each model
  (:mod:`bugzoo.judge.sweep_profile`).

Tables go to ``results/perf/`` with the command that made them.
"""

from __future__ import annotations

import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from bugzoo.commands import command_line
from bugzoo.config import compose_run
from bugzoo.data.base import forever
from bugzoo.detector_registry import load_detector, select_detectors
from bugzoo.errors import ArgumentParser
from bugzoo.harness import store
from bugzoo.harness.budget import budget_scope
from bugzoo.harness.pool import stop_parked_workers
from bugzoo.harness.processes import worker_context
from bugzoo.harness.runner import execute
from bugzoo.harness.sandbox import confinement
from bugzoo.harness.sweep import (
    QUICK_OVERRIDES,
    plan_runs,
    run_timeout,
    select_scenarios,
    sweep,
    sweep_options,
    sweep_parser,
)
from bugzoo.harness.traceset import stored_runs
from bugzoo.harness.twin import twin_for
from bugzoo.harness.watch import Watch, call_all, observer, run_view, watches_for
from bugzoo.judge.changed_cost import CHECKOUT, changed_cost, checkout_name
from bugzoo.judge.committed_keys import check_checkout
from bugzoo.judge.outcomes import suite_members
from bugzoo.judge.overfit import overfit_single_batch
from bugzoo.judge.sealed import sealed_outcomes, sealed_selection
from bugzoo.judge.sweep_profile import profile_sweep
from bugzoo.judge.tables import markdown
from bugzoo.models import BUILTIN, MODELS
from bugzoo.paths import cache_folder
from bugzoo.trace import RunFacts
from bugzoo.train import Trainer

log = logging.getLogger(__name__)


def baselines(models: list[str], repeats: int = 3) -> pd.DataFrame:
    rows = []
    for model in models:
        cfg = compose_run([f"model={model}"])
        runs = [execute(cfg).summary for _ in range(repeats)]
        overfit = overfit_single_batch(cfg)
        s = runs[0]
        rows.append({
            "model": model, "initial_loss": round(s["initial_loss"], 3),
            "log_C": round(s["expected_initial_loss"], 3),
            # the step its loss on one fixed batch came within 0.05 of that batch's floor (0,
            # or for a language model what the batch's shared prefixes leave unpredictable)
            "overfit_step_within_0.05": overfit["reached_step"],
            "final_val_acc": round(s["final_val_acc"], 3), "holdout_acc": round(s["holdout_acc"], 3),
            "final_val_loss": round(s["final_val_loss"], 3),
            "entropy_floor": round(s["entropy_floor"], 3) if "entropy_floor" in s else None,
            "wall_s_median_of_3": round(statistics.median(r["wall_s"] for r in runs), 2),
        })
    return pd.DataFrame(rows)


class LoopVariant:
    """One trainer stepping in blocks: bare (no telemetry), instrumented, or with detectors.

    Autograd's anomaly mode is process-wide: whatever a variant's detectors set in ``setup`` is
    captured, switched off again, and switched on for that variant's own blocks only."""

    def __init__(self, model: str, kind: str, detectors: list[str]):
        self.kind = kind
        cfg = compose_run([f"model={model}", "harness.steps=100000"])
        self.trainer = Trainer(cfg).build()
        self.trainer.model.train()
        self.trainer.batches = forever(self.trainer.train_loader)
        # under the run's time budget per call, as in a real run: arming it is part of the cost
        chosen = [load_detector(d) for d in detectors] if kind == "detectors" else []
        self.watches = watches_for(chosen, cfg)
        t0 = time.perf_counter()
        with budget_scope():
            twin = twin_for(self.watches, cfg, None)
            call_all(self.watches, "setup", run_view(self.trainer, twin))
        self.setup_s = time.perf_counter() - t0
        self.observe = observer(self.watches)
        self.anomaly = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
        torch.autograd.set_detect_anomaly(False)
        self.times: list[float] = []
        self.trace: list[dict] = []

    def block(self, steps: int) -> None:
        with torch.autograd.set_detect_anomaly(*self.anomaly), budget_scope():
            self._steps(steps)

    def _steps(self, steps: int) -> None:
        t = self.trainer
        for _ in range(steps):
            t0 = time.perf_counter()
            t.data_s = 0.0
            loss = t.train_step()
            t.unscale_gradients()
            if self.kind != "bare":
                t.telemetry.measure_gradients()
            t.clip_gradients()
            t.optimizer_step()
            t.scheduler_step()
            if self.kind != "bare":
                obs = t.telemetry.observe(t.step, loss, lr=t.lr(), training=True, step_s=0.0,
                                          data_s=t.data_s, elapsed_s=0.0, cuda_mb=0.0, scale=None)
                self.trace.append(obs.row())  # the run's trace row, as the real loop keeps it
                self.observe(obs)
            else:
                loss.item()  # the bare loop still reads its loss once per step
            t.step += 1
            self.times.append(time.perf_counter() - t0)

    def close(self) -> float:
        """Tear the detectors down; returns how long that took (s)."""
        t0 = time.perf_counter()
        with torch.autograd.set_detect_anomaly(*self.anomaly), budget_scope():  # as they left it
            call_all(self.watches, "teardown")
        return time.perf_counter() - t0


def time_pair(model: str, variant: str, detectors: list[str] | None, blocks: int = 15,
              steps: int = 4, against: str = "bare") -> dict:
    """Time one variant against a reference loop on ``model``'s defaults: telemetry only
    (``detectors`` None) or telemetry with ``detectors`` watching, against the bare loop or
    (``against="telemetry"``: what a detector adds to a harness that records telemetry
    anyway) the loop with telemetry.

    The two take turns in ``blocks`` blocks of ``steps`` steps, so that drifts of the machine's
    speed fall on both alike, and only their two models share the CPU caches, as in a real run
    (one model per process); with every variant's model alive at once, cache misses inflated
    the ratios by 0.1-0.3. ``median_x`` is the ratio of median step times to the bare loop's;
    ``mean_x`` the ratio of means, which also counts work done on some steps only;
    ``setup_s`` the one-off cost of the detectors' ``setup`` (e.g. hashing the data splits)
    and of a twin run, when one asks for it, ``teardown_s`` that of their ``teardown``;
    ``paid_x`` what a user pays for a whole run on the model's defaults: (setup + steps x mean
    step + teardown) over steps x the reference loop's mean step."""
    torch.manual_seed(0)
    bare = LoopVariant(model, against, [])
    watched = LoopVariant(model, "telemetry" if detectors is None else "detectors",
                          detectors or [])
    bare.block(3)  # warm-up
    watched.block(3)
    bare.times.clear()
    watched.times.clear()
    for _ in range(blocks):
        bare.block(steps)
        watched.block(steps)
    teardown_s = watched.close()
    run_steps = int(compose_run([f"model={model}"]).harness.steps)
    mean_watched, mean_bare = statistics.mean(watched.times), statistics.mean(bare.times)
    paid = (watched.setup_s + teardown_s + run_steps * mean_watched) / (run_steps * mean_bare)
    return {"model": model, "variant": variant,
            "median_x": round(statistics.median(watched.times) / statistics.median(bare.times), 3),
            "mean_x": round(mean_watched / mean_bare, 3), "paid_x": round(paid, 3),
            "setup_s": round(watched.setup_s, 3), "teardown_s": round(teardown_s, 4),
            "step_ms": round(1000 * statistics.median(watched.times), 2),
            "bare_ms": round(1000 * statistics.median(bare.times), 2)}


Pair = tuple[str, str, list[str] | None]  # (model, variant name, detectors or None)


def time_pairs(pairs: list[Pair], workers: int, blocks: int = 15, steps: int = 4,
               against: str = "bare", progress: bool = False) -> Iterator[dict]:
    """:func:`time_pair` for each pair, on ``workers`` processes (one torch thread each);
    yields each row as it is measured."""
    context = worker_context()
    with ProcessPoolExecutor(workers, mp_context=context, initializer=torch.set_num_threads,
                             initargs=(1,)) as pool:
        futures = [pool.submit(time_pair, *pair, blocks, steps, against) for pair in pairs]
        with tqdm(total=len(futures), unit="pair", disable=not progress) as bar:
            for future in as_completed(futures):
                bar.update()
                yield future.result()


def overhead_variants(detectors: list[str]) -> dict[str, list[str] | None]:
    """What ``perf overhead`` times: telemetry alone, each detector alone, each suite, and all
    the detectors together."""
    variants: dict[str, list[str] | None] = {"telemetry": None, **{d: [d] for d in detectors}}
    variants.update(suite_members(detectors))
    variants["all detectors"] = detectors
    return variants


def overhead(models: list[str], detectors: list[str], workers: int = 1, blocks: int = 15,
             steps: int = 4) -> pd.DataFrame:
    """One row per model and variant (:func:`overhead_variants`), plus the bare loop's own."""
    variants = overhead_variants(detectors)
    pairs = [(m, name, chosen) for m in models for name, chosen in variants.items()]
    measured = {(r["model"], r["variant"]): r for r in time_pairs(pairs, workers)}
    rows = []
    for model in models:
        bare_ms = [measured[model, v]["bare_ms"] for v in variants]
        rows.append({"model": model, "variant": "bare", "median_x": 1.0, "mean_x": 1.0,
                     "paid_x": 1.0, "setup_s": 0.0, "teardown_s": 0.0,
                     "step_ms": round(statistics.median(bare_ms), 2)})
        rows += [{k: v for k, v in measured[model, name].items() if k != "bare_ms"}
                 for name in variants]
    return pd.DataFrame(rows)


def sweep_efficiency(patterns: list[str] | None, quick: bool, seeds: list[int], workers: int,
                     progress: bool = True) -> pd.DataFrame:
    """Run one detector-free sweep on 1 worker, then on ``workers``; each first with no
    composition kept, then with every one kept on disk (as on any sweep after the first).

    Efficiency = (sum of the sweep's own run times / workers) / sweep wall time: 1.0 means the
    slots lost nothing to start-up, composition, scheduling or stragglers.
    ``efficiency_vs_serial`` divides the first serial sweep's run times instead, so that the
    workers slowing each other counts too; on a shared machine it also counts how much faster
    or slower the machine ran than during that sweep. Every sweep starts fresh workers (forked
    from the fork server the first one started), so none reuses what an earlier one composed in
    memory; a ``composed`` sweep first deletes the compositions kept on disk (a cache: they are
    composed again as needed).
    """
    scenarios = select_scenarios(patterns, quick=quick)
    overrides = list(QUICK_OVERRIDES if quick else ())
    timeout = run_timeout(scenarios, overrides)
    rows = []
    kind = "quick" if quick else "selected" if patterns else "default"
    label = f"{kind}, {len(seeds)} seed" + ("s" if len(seeds) > 1 else "")
    counts = sorted({1, workers})
    kept = cache_folder("compositions")
    with tempfile.TemporaryDirectory(prefix="bugzoo-perf-") as tmp:
        walls, run_s = {}, {}
        for compositions in ("composed", "kept"):
            for n in counts:
                if compositions == "composed" and kept is not None:
                    shutil.rmtree(kept, ignore_errors=True)
                stop_parked_workers()
                out = Path(tmp) / f"{compositions}{n}"
                tasks = plan_runs(scenarios, seeds, overrides, [], out, timeout)
                t0 = time.perf_counter()
                sweep(tasks, n, progress)
                walls[compositions, n] = time.perf_counter() - t0
                run_s[compositions, n] = sum(store.read_summary(t.path)["wall_s"] for t in tasks)
        serial = run_s["composed", 1]
        for (compositions, n), wall in walls.items():
            rows.append({"sweep": label, "compositions": compositions,
                         "runs": len(scenarios) * len(seeds), "workers": n,
                         "wall_s": round(wall, 1), "sum_run_s": round(run_s[compositions, n], 1),
                         "sum_serial_run_s": round(serial, 1),
                         "efficiency": round(run_s[compositions, n] / n / wall, 3),
                         "efficiency_vs_serial": round(serial / n / wall, 3)})
    return pd.DataFrame(rows)


RESCORE_NOTE = (
    "The sealed built-ins (`Detector.sealed`, the `default` selection's) scored on every run of "
    "a stored trace set, training nothing: `sealed` as `bugzoo score --detectors` and `bugzoo "
    "replay` score them (one confined job per run, forked from zygotes started in new "
    "namespaces, `workers` of them), `in_process` the same records shown to the same detectors "
    "in this process, one run after another, with no confinement. `ratio` is sealed over "
    "in-process, measured in one run of this command.")


def rescore(source: Path, names: list[str], workers: int) -> pd.DataFrame:
    """Seconds to score the sealed detectors ``names`` on every stored run of ``source``,
    sealed and in this process."""
    runs = list(stored_runs(source))
    start = time.perf_counter()
    sealed_outcomes(runs, names, [], workers=workers)
    sealed_s = time.perf_counter() - start
    start = time.perf_counter()
    for run in runs:
        watches = [Watch(load_detector(name), None) for name in names]
        with budget_scope():
            call_all(watches, "setup", RunFacts.of(run.summary))
            for obs in run.observations():
                call_all(watches, "observe", obs)
            call_all(watches, "teardown")
    in_process_s = time.perf_counter() - start
    return pd.DataFrame([{"source": str(source), "runs": len(runs), "detectors": len(names),
                          "workers": workers, "confinement": confinement(),
                          "sealed_s": round(sealed_s, 1), "in_process_s": round(in_process_s, 1),
                          "ratio": round(sealed_s / in_process_s, 2),
                          "sealed_ms_per_run": round(1000 * sealed_s / len(runs), 1)}])


def overhead_markdown(table: pd.DataFrame) -> str:
    """Variants down, models across: ``median_x / mean_x``, then bare step times and setup."""
    cells = table.assign(cell=table["median_x"].map("{:.2f}".format) + " / "
                         + table["mean_x"].map("{:.2f}".format))
    variants, models = list(dict.fromkeys(table["variant"])), list(dict.fromkeys(table["model"]))
    ratios = cells.pivot(index="variant", columns="model", values="cell").loc[variants, models]
    bare = table[table["variant"] == "bare"][["model", "step_ms"]]
    slow = table[table["setup_s"] >= 0.01]
    setup = (slow.pivot(index="variant", columns="model", values="setup_s")
             .reindex(index=[v for v in variants if v in set(slow["variant"])], columns=models)
             .fillna(0))
    return "\n".join([markdown(ratios.reset_index()), "", "Bare loop, median step time (ms):",
                      "", markdown(bare), "", "One-off `setup` cost (s), where 0.01 s or more:",
                      "", markdown(setup.reset_index())])


def write(table: pd.DataFrame, out: Path, name: str, title: str, command: str, note: str = "",
          text: str | None = None) -> Path:
    """``table`` as CSV and as Markdown in ``out`` (``text`` instead of the plain table, when
    given); a cell with no value reads "–" in the Markdown."""
    table.to_csv(out / f"{name}.csv", index=False)
    head = [f"# {title}", "", f"Regenerate with `{command}` "
            f"(torch {torch.__version__}, {torch.get_num_threads()} thread(s)).", ""]
    if note:
        head += [note, ""]
    shown = table.astype(object).where(table.notna(), "–")
    (out / f"{name}.md").write_text("\n".join([*head, text or markdown(shown), ""]))
    return out / f"{name}.md"


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results perf", description=__doc__.splitlines()[0],
                       parents=[sweep_parser()])
    p.add_argument("what", choices=["baselines", "overhead", "sweep", "profile", "rescore",
                                    "changed"])
    p.add_argument("--model", dest="models", nargs="+", default=list(BUILTIN), metavar="MODEL",
                   help=f"default: all ({', '.join(BUILTIN)})")
    p.add_argument("--detectors", nargs="+", metavar="NAME",
                   help="names or selectors, as bench takes them (default: 'default tools')")
    p.add_argument("--quick", action="store_true", help="sweep: the --quick sweep's scenarios")
    p.add_argument("--source", default="results/traces", help="rescore: the stored runs "
                   "(a trace set or a sweep folder; default: results/traces)")
    p.add_argument("--before", type=Path, metavar="CHECKOUT", action="append", default=[],
                   help="changed: another checkout (the last release's) measured beside this "
                        "one (repeatable, oldest first)")
    p.add_argument("--out", default="results/perf", help="where the tables go "
                   "(default: results/perf)")
    args = p.parse_args(argv)
    options = sweep_options(args, "0")
    for model in args.models:
        MODELS.check(model)
    out = store.ensure_writable(Path(args.out))
    torch.set_num_threads(1)
    command = command_line("results perf", argv)
    if args.what == "baselines":
        path = write(baselines(args.models), out, "baselines", "Clean baselines", command)
    elif args.what == "sweep":
        table = sweep_efficiency(options.patterns, args.quick, options.seeds, options.workers,
                                 options.progress)
        name = "sweep_quick" if args.quick else "sweep"
        path = write(table, out, name, "Sweep efficiency", command, SWEEP_NOTE)
    elif args.what == "rescore":
        names = sealed_selection(args.detectors or ["default"])
        path = write(rescore(Path(args.source), names, options.workers), out, "rescore",
                     "Rescoring without training", command,
                     RESCORE_NOTE + " Detectors: " + ", ".join(names) + ".")
    elif args.what == "changed":
        for before in args.before:
            check_checkout(before)
        trees = {**{f"before ({checkout_name(b)})": b for b in args.before},
                 "this checkout": CHECKOUT}
        path = write(changed_cost(trees), out, "changed", "What --changed redoes after an edit",
                     command, CHANGED_NOTE)
    elif args.what == "profile":
        path = write_profile(options.patterns, options.seeds[0], options.workers, args.models,
                             out, command)
    else:
        detectors = select_detectors(args.detectors) if args.detectors else overhead_detectors()
        note = OVERHEAD_NOTE + " Detectors: " + ", ".join(detectors) + "."
        table = overhead(args.models, detectors, options.workers)
        path = write(table, out, "overhead", "Loop overhead", command, note, overhead_markdown(table))
    print(path.read_text())
    return 0


def write_profile(patterns: list[str] | None, seed: int, workers: int, models: list[str],
                  out: Path, command: str) -> Path:
    """``bugzoo results perf profile``: the phases in ``profile.csv``, the slots in
    ``profile_sweep.csv``, telemetry per step in ``profile_telemetry.csv``, all in
    ``profile.md``."""
    profile = profile_sweep(patterns, seed, workers, models, progress=log.info)
    profile.sweep.to_csv(out / "profile_sweep.csv", index=False)
    profile.telemetry.to_csv(out / "profile_telemetry.csv", index=False)
    text = "\n".join([
        "Inside the pooled runs, one after another in one process (each phase's own time):", "",
        markdown(profile.phases), "",
        f"The whole sweep, {profile.runs} runs on {profile.workers} workers:", "",
        markdown(profile.sweep), "",
        "Telemetry per step (microseconds), one clean run of each model on its defaults, "
        "beside the training step it measures:", "", markdown(profile.telemetry)])
    return write(profile.phases, out, "profile", "Where a sweep's time goes", command,
                 PROFILE_NOTE, text)


def overhead_detectors() -> list[str]:
    """What ``perf overhead`` times by default: a plain bench's detectors plus every tool that
    can run here (the costly ones stay out of sweeps, which is why their cost is worth a row)."""
    return sorted(select_detectors(["default", "tools"]))


CHANGED_NOTE = (
    "Each edit is made in a scratch copy of the checkout, and every key of the committed "
    "results is computed there and in an unedited copy: a moved key is a result the "
    "`--changed` commands make again (`bugzoo results traces export --keep-unchanged` for the dev "
    "runs, `bugzoo results validate --changed`, `bugzoo task validate|set|agents --changed`). Seconds "
    "are estimated from the run times the published dev traces recorded (a validity row: its "
    "5 buggy and 5 control runs at their scenarios' mean; a health row: 5 runs), on 1 worker; "
    "the task tables' rows are counted, not timed.")
OVERHEAD_NOTE = (
    "Step time of each variant relative to the bare loop (no telemetry, no detectors), as "
    "`median_x / mean_x`: the ratio of median step times, then of mean step times (which also "
    "counts work done on some steps only). `suite: built-ins` is bugzoo's own heuristics, "
    "`suite: built-ins + tools` adds the tool adapters. Each variant steps in blocks "
    "interleaved with the bare loop's, in a process of its own with one thread; "
    "`overhead.csv` holds the per-variant figures.")
PROFILE_NOTE = (
    "The sweep a bench plans (each buggy run beside its disarmed twin, the healthy variants, "
    "the default detectors), at one seed. First the pooled runs one after another in one "
    "process, a stopwatch around each phase of a run (`bugzoo/judge/sweep_profile.py`); then "
    "the whole sweep on the pool, where a slot is one worker for the sweep's wall time.")
SWEEP_NOTE = (
    "The same single-seed sweep without detectors, on 1 worker, then on all, each with fresh "
    "workers: first with no composition kept (`composed`: each worker composes each scenario it "
    "runs with Hydra), then with every composition kept on disk by the sweeps before (`kept`: as "
    "on any later sweep of these scenarios). `efficiency` = (sum of the sweep's own run times / "
    "workers) / sweep wall time, the share of the slots' time spent inside runs; the gap to 1 "
    "is process start-up, config composition, writing the run folders and waiting on the "
    "slowest run. Run times are each run's own `wall_s` (build, train, evaluate). "
    "`efficiency_vs_serial` divides the first serial sweep's run times instead: it also counts "
    "the workers slowing each other, and on a shared machine how much faster or slower the "
    "machine ran than during that sweep (above 1 when it ran faster).")
