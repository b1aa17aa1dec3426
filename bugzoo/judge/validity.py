"""``bugzoo results validate``: prove every scenario's bug manifests against its clean control.

For each buggy scenario, its bug's declared symptom metric (``Bug.check``) is compared over
several seeds between the buggy runs and runs of the scenario's matched control (the clean
scenario with the same settings): an exact one-sided permutation test of the rank sums for
metrics, Fisher's exact test for events (NaN, crash, hang). Benjamini-Hochberg q-values correct
for the many scenarios tested; a scenario is valid at q < alpha (0.01). Runs are stored under
``results/runs/validity/{buggy,control}/`` and reused on later calls. Excluded scenarios are
validated too, so ``validity.md`` shows what "does not manifest" measured.

A scenario that is not valid over 5 seeds although its effect interval excludes 0 is tested
again over ``POWERED_SEEDS`` (10 seeds: an exact p-value down to 1/184,756): 5 seeds could not
prove a real effect. One marked ``unproven`` that then passes has a symptom after all, and its
mark should go.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from bugzoo import cpu_kernels
from bugzoo.bugs import get_bug
from bugzoo.commands import command_line
from bugzoo.config import compose_run
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.harness.pool import RunTask
from bugzoo.harness.runner import execute
from bugzoo.harness.sweep import select_scenarios, sweep, sweep_options, sweep_parser
from bugzoo.judge.stats import BOOTSTRAP
from bugzoo.judge.tables import markdown
from bugzoo.judge.templates import render
from bugzoo.provenance import code_key, key_of
from bugzoo.release import scenario_key
from bugzoo.scenarios import Scenario, default_scenario, get_scenario, list_scenarios

log = logging.getLogger(__name__)

ALPHA = 0.01
HEALTH_MARGIN = 0.10  # accuracy a healthy variant may lose to its model's default, on any seed
# The language model on its defaults, against the source it learns (``language_table``):
# validation loss at most this far above the source's entropy (nats per token: a perplexity
# within e^0.1, about 10%, of the source's own)
ENTROPY_MARGIN = 0.10
# and sentences it writes scored by the source at most this far above its holdout loss (nats
# per token). Sampling writes the mass a model still leaks to tokens the source never writes,
# each scored at log(1 / IMPOSSIBLE) = 13.8 nats: a 3% leak alone costs 0.4 nats.
GENERATION_MARGIN = 0.50
VALIDITY_SEEDS = "0,1,2,3,4"
POWERED_SEEDS = list(range(10))


@dataclass(frozen=True)
class Comparison:
    """A one-sided test of buggy runs against clean ones: the exact p-value and the effect
    (difference of medians, or of event rates, buggy minus clean) with its 95% percentile
    bootstrap interval."""

    p_value: float
    effect: float
    effect_lo: float
    effect_hi: float


# every permutation when there are at most this many, so that the test is exact and its p the
# same on every run: 5 vs 5 seeds have 252, and the retest's 10 vs 10 have 184,756
PERMUTATIONS = 200_000


def compare(metric: str, direction: str, buggy: list, clean: list) -> Comparison:
    """One-sided test that ``buggy`` moved in ``direction`` from ``clean``.

    Events (and "varies": whether two runs of one seed differed) use Fisher's exact test;
    metrics an exact permutation test of the rank sums (the Mann-Whitney statistic, exact with
    ties, where scipy's Mann-Whitney would fall back to a normal approximation). A missing
    value (no evaluation before a crash) counts as the worst outcome."""
    if direction in ("event", "varies"):
        b, c = np.array(buggy, dtype=bool), np.array(clean, dtype=bool)
        table = [[b.sum(), len(b) - b.sum()], [c.sum(), len(c) - c.sum()]]
        p = stats.fisher_exact(table, alternative="greater").pvalue
        return Comparison(float(p), *_effect(b.astype(float), c.astype(float), np.mean))
    worst = math.inf if direction == "higher" else -math.inf
    b, c = (np.array([worst if x is None or x != x else x for x in xs], dtype=float)
            for xs in (buggy, clean))
    ranks = stats.rankdata(np.concatenate([b, c]))
    result = stats.permutation_test(
        (ranks[:len(b)], ranks[len(b):]), lambda x, y, axis: x.mean(axis) - y.mean(axis),
        permutation_type="independent", vectorized=True, n_resamples=PERMUTATIONS,
        alternative="greater" if direction == "higher" else "less")
    return Comparison(float(result.pvalue), *_effect(b[np.isfinite(b)], c[np.isfinite(c)],
                                                      np.median))


def _effect(buggy: np.ndarray, clean: np.ndarray, stat) -> tuple[float, float, float]:
    """``stat(buggy) - stat(clean)`` with its 95% percentile-bootstrap interval."""
    if len(buggy) == 0 or len(clean) == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(0)
    draws = (stat(buggy[rng.integers(0, len(buggy), (BOOTSTRAP, len(buggy)))], axis=1)
             - stat(clean[rng.integers(0, len(clean), (BOOTSTRAP, len(clean)))], axis=1))
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(stat(buggy) - stat(clean)), float(lo), float(hi)


def measure_symptom(overrides: list[str], seed: int, metric: str, direction: str):
    """The metric of one run; for ``"varies"``, whether two runs with the same seed differ."""
    value = execute(compose_run([*overrides, f"seed={seed}"])).summary.get(metric)
    if direction != "varies":
        return value
    return value != execute(compose_run([*overrides, f"seed={seed}"])).summary.get(metric)


def control_overrides(scenario: Scenario) -> list[str]:
    """How to compose the scenario's clean control: the control scenario itself, or (for a
    scenario without a control file) the scenario with its bug removed."""
    if scenario.control:
        return [f"scenario={scenario.control}"]
    return [f"scenario={scenario.id}", "~bug"]


@dataclass(frozen=True)
class ValidityPlan:
    """The runs that validate the chosen scenarios: each buggy one and its control, each
    clean one (for its health, beside its model's default), over the seeds."""

    tasks: list[RunTask]
    buggy: list[Scenario]
    clean: list[Scenario]


def plan_validity_runs(root: Path, patterns: list[str] | None, seeds: list[int],
                       overrides: list[str], health: bool = False) -> ValidityPlan:
    """Runs of the chosen scenarios (excluded ones included, controls brought along), and with
    ``health`` of the default scenarios of their models: buggy ones under ``buggy/``, clean
    ones under ``control/``."""
    chosen = select_scenarios(patterns, include_excluded=True)
    buggy, clean = [s for s in chosen if not s.clean], [s for s in chosen if s.clean]
    for s in buggy:
        if s.control is None:
            raise UsageError(f"scenario {s.id} has no clean control: add a clean scenario "
                             f"with its model and settings (see {s.path})")
    defaults = [default_scenario(m) for m in sorted({s.model for s in clean})] if health else []
    timeout = float(compose_run(overrides).harness.timeout_s)
    tasks: dict[Path, RunTask] = {}

    def plan(scenario: Scenario, kind: str, prefix: str = "") -> None:
        for seed in seeds:
            task = RunTask(scenario, seed, tuple(overrides), (), str(root / f"{prefix}{kind}"),
                           scenario.isolate, timeout)
            tasks[task.path] = task

    for s in buggy:
        # "varies" symptoms compare two runs of the same seed: run each one twice
        twice = get_bug(s.bug).check.direction == "varies"
        for prefix in ("", "repeat-") if twice else ("",):
            plan(s, "buggy", prefix)
            plan(get_scenario(s.control), "control", prefix)
    for s in {*clean, *defaults}:
        plan(s, "control")
    return ValidityPlan(list(tasks.values()), buggy, clean)


def to_power(table: pd.DataFrame, seeds: list[int]) -> list[str]:
    """The scenarios not valid although their effect interval excludes 0, when tested over at
    least the validity seeds' count but fewer than ``POWERED_SEEDS``. Fewer seeds than the
    validity default are a quick look, where the p-value cannot reach the threshold at all:
    testing again would turn it into the full run it was chosen not to be."""
    if not len(table) or not len(VALIDITY_SEEDS.split(",")) <= len(seeds) < len(POWERED_SEEDS):
        return []
    excludes_zero = (table.effect_lo > 0) | (table.effect_hi < 0)
    return sorted(table.scenario[~table.valid & excludes_zero])


def read_metric(root: Path, sweep_dir: str, scenario: str, seeds: list[int], metric: str) -> list:
    return [store.read_summary(store.run_dir(root, sweep_dir, scenario, s)).get(metric)
            for s in seeds]


def summarise(root: Path, scenarios: list[Scenario], seeds: list[int],
              powered: dict[str, list[int]] | None = None) -> pd.DataFrame:
    """One row per buggy scenario: the symptom test's statistics, over ``seeds`` or, for the
    scenarios ``powered`` names, over the seeds it gives them."""
    rows = []
    for scenario in scenarios:
        seeds_here = (powered or {}).get(scenario.id, seeds)
        sid, control = scenario.id, scenario.control
        bug = get_bug(scenario.bug)
        metric, direction = bug.check.metric, bug.check.direction
        buggy = read_metric(root, "buggy", sid, seeds_here, metric)
        clean = read_metric(root, "control", control, seeds_here, metric)
        if direction == "varies":  # did the repeat of each seed differ from its first run?
            buggy = [a != b for a, b in zip(
                buggy, read_metric(root, "repeat-buggy", sid, seeds_here, metric), strict=True)]
            clean = [a != b for a, b in zip(
                clean, read_metric(root, "repeat-control", control, seeds_here, metric),
                strict=True)]
        comparison = compare(metric, direction, buggy, clean)
        rows.append({
            "scenario": sid, "bug": bug.id, "model": scenario.model,
            "category": bug.category, "metric": metric, "direction": direction,
            "seeds": len(seeds_here), "control": control, **asdict(comparison),
            "excluded": scenario.excluded or "", "unproven": scenario.unproven or "",
        })
    return with_q_values(pd.DataFrame(rows))


def with_q_values(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with Benjamini-Hochberg q-values across every scenario in it, and ``valid``."""
    table = table.drop(columns=["q_value", "valid"], errors="ignore")
    if len(table):
        table["q_value"] = stats.false_discovery_control(table["p_value"], method="bh")
        table["valid"] = table["q_value"] < ALPHA
    return table


def health_table(root: Path, scenarios: list[Scenario], seeds: list[int]) -> pd.DataFrame:
    """One row per clean scenario: its final validation accuracy (and loss) over the seeds
    beside its model's default. A healthy variant (a clean scenario that controls no bug) must
    end every seed within ``HEALTH_MARGIN`` of the default's mean accuracy; a language model's,
    whose next-token accuracy is low by nature, within ``ENTROPY_MARGIN`` of the default's
    mean validation loss. A control mirrors its bugs' settings (a deep net, little data, a hot
    learning rate) and is reported, not judged."""
    controls = {s.control for s in list_scenarios() if s.control}
    rows = []
    for s in scenarios:
        default = default_scenario(s.model)
        accuracy = read_metric(root, "control", s.id, seeds, "final_val_acc")
        loss = read_metric(root, "control", s.id, seeds, "final_val_loss")
        reference = float(np.mean(read_metric(root, "control", default.id, seeds,
                                              "final_val_acc")))
        reference_loss = float(np.mean(read_metric(root, "control", default.id, seeds,
                                                   "final_val_loss")))
        language = store.read_summary(store.run_dir(root, "control", s.id, seeds[0])).get(
            "entropy_floor") is not None
        role = "control" if s.id in controls else "variant"
        healthy = (max(loss) <= reference_loss + ENTROPY_MARGIN if language
                   else min(accuracy) >= reference - HEALTH_MARGIN)
        rows.append({"scenario": s.id, "model": s.model, "role": role,
                     "description": s.description, "seeds": len(seeds),
                     "mean_val_acc": float(np.mean(accuracy)), "min_val_acc": min(accuracy),
                     "default_val_acc": reference, "max_val_loss": max(loss),
                     "default_val_loss": reference_loss, "judged_by": (
                         "validation loss" if language else "validation accuracy"),
                     "healthy": None if role == "control" else healthy})
    return pd.DataFrame(rows)


def language_table(root: Path, seeds: list[int]) -> pd.DataFrame:
    """The causal language model on its defaults, one row per seed: its validation loss beside
    the source's entropy (the floor), and the gap between the sentences it writes and the text
    it reads (``generation_gap``), each within its margin or not."""
    rows = []
    for seed in seeds:
        summary = store.read_summary(store.run_dir(root, "control", default_scenario("gpt").id,
                                                   seed))
        excess = summary["final_val_loss"] - summary["entropy_floor"]
        rows.append({"seed": seed, "final_val_loss": summary["final_val_loss"],
                     "entropy_floor": summary["entropy_floor"], "excess": excess,
                     "generation_gap": summary["generation_gap"],
                     "within": 0 < excess <= ENTROPY_MARGIN
                     and summary["generation_gap"] <= GENERATION_MARGIN})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- carrying
# what makes a row from its runs, besides the runs themselves
ROW_ENTRIES = tuple(f"bugzoo.judge.validity:{name}" for name in (
    "plan_validity_runs", "summarise", "to_power", "health_table", "language_table"))


def row_key(scenarios: list[str], seeds: list[int], overrides: list[str],
            run_key: Callable[[str], str | None] = scenario_key,
            row_code: str | None = None) -> str | None:
    """What decided a row: the release keys of its scenarios' runs (the one measured and the
    one it is measured against; ``run_key`` gives them, today's by default), the seeds asked
    for, the run-setting overrides and the code that plans the runs and tests them
    (:data:`ROW_ENTRIES`; ``row_code`` is its key, today's by default). None where a scenario
    is outside the release: such a row is never carried."""
    keys = [run_key(s) for s in scenarios]
    return None if None in keys else key_of(keys, seeds, list(overrides),
                                            row_code or code_key(*ROW_ENTRIES))


def with_keys(validity: pd.DataFrame, health: pd.DataFrame, language: pd.DataFrame | None,
              seeds: list[int], overrides: list[str],
              run_key: Callable[[str], str | None] = scenario_key,
              row_code: str | None = None) -> tuple:
    """The three tables, each row with its ``key`` (:func:`row_key`)."""
    tables = (validity, health, language)
    return tuple(None if table is None else
                 table.assign(key=[row_key(pair, seeds, overrides, run_key, row_code)
                                   for pair in pairs])
                 for table, pairs in zip(tables, row_scenarios(*tables), strict=True))


def row_scenarios(validity: pd.DataFrame, health: pd.DataFrame,
                  language: pd.DataFrame | None) -> tuple[list[list[str]], ...]:
    """Per table, per row, the scenarios whose runs decide it: the one measured, then the one
    it is measured against (a validity row's control, a health row's model default)."""
    return ([[r.scenario, r.control] for r in validity.itertuples()],
            [[r.scenario, default_scenario(r.model).id] for r in health.itertuples()],
            [] if language is None else [[default_scenario("gpt").id]] * len(language))


@dataclass(frozen=True)
class Carried:
    """Rows of the tables written before that still stand: their key (:func:`row_key`) is
    today's, so the same code decided their runs, with the same seeds and overrides."""

    validity: pd.DataFrame
    health: pd.DataFrame
    language: pd.DataFrame

    @property
    def scenarios(self) -> set[str]:
        return {*self.validity.get("scenario", []), *self.health.get("scenario", [])}


def read_tables(out_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``validity.csv``, ``health.csv`` and ``language.csv`` in ``out_dir`` as ``write_tables``
    was given them (a missing table is empty). Tables without keys are a UsageError."""
    tables = {}
    for name in ("validity", "health", "language"):
        path = out_dir / f"{name}.csv"
        # a key is text: one of hex digits alone must not read back as a number
        table = (pd.read_csv(path, dtype={"key": str}) if path.is_file()
                 else pd.DataFrame(columns=["key"]))
        if "key" not in table:
            raise UsageError(f"{path} has no key column (written before --changed existed): "
                             "run a full `bugzoo results validate` once")
        tables[name] = table
    validity, health = tables["validity"], tables["health"]
    validity = validity.assign(**{c: validity[c].astype(object).fillna("")
                                  for c in ("excluded", "unproven") if c in validity})
    if "healthy" in health:  # a control's empty cell reads back as "not judged"
        health = health.assign(healthy=health.healthy.astype(object).where(
            health.healthy.notna(), None))
    return validity, health, tables["language"]


def carried_rows(out_dir: Path, chosen: list[str], seeds: list[int],
                 overrides: list[str]) -> Carried:
    """The rows of the tables in ``out_dir`` (:func:`read_tables`) for the ``chosen``
    scenarios that still stand."""
    validity, health, language = read_tables(out_dir)
    validity = validity[validity.scenario.isin(chosen)] if len(validity) else validity
    health = health[health.scenario.isin(chosen)] if len(health) else health
    fresh = with_keys(validity.drop(columns="key"), health.drop(columns="key"),
                      language.drop(columns="key") if len(language) else None, seeds,
                      overrides)
    stands = [table[table.key == now.key] if now is not None else table.iloc[:0]
              for table, now in zip((validity, health, language), fresh, strict=True)]
    return Carried(*stands)


def merged(new: pd.DataFrame, carried: pd.DataFrame) -> pd.DataFrame:
    """``new``'s rows and the ``carried`` rows of the scenarios ``new`` lacks, by scenario."""
    if not len(carried):
        return new
    kept = carried[~carried.scenario.isin(set(new.get("scenario", [])))]
    return (pd.concat([new, kept], ignore_index=True) if len(new) else kept.reset_index(
        drop=True)).sort_values("scenario", kind="stable", ignore_index=True)


def write_tables(table: pd.DataFrame, healthy: pd.DataFrame, out_dir: Path,
                 command: str, language: pd.DataFrame | None = None,
                 carried: int = 0) -> None:
    """``validity.csv``, ``health.csv`` and ``validity.md``: the default sweep's buggy
    scenarios, the unproven and the excluded ones with their reason and what they measured,
    then the health of the clean scenarios."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "validity.csv", index=False)
    healthy.to_csv(out_dir / "health.csv", index=False)
    if language is not None and len(language):
        language.to_csv(out_dir / "language.csv", index=False)
    (out_dir / "validity.md").write_text(validity_page(table, healthy, command, language,
                                                       carried))


def validity_page(table: pd.DataFrame, healthy: pd.DataFrame, command: str,
                  language: pd.DataFrame | None = None, carried: int = 0) -> str:
    """``validity.md`` from the tables ``write_tables`` writes beside it."""
    shown = table.assign(
        p_value=table.p_value.map(lambda p: f"{p:.2g}"),
        q_value=table.q_value.map(lambda q: f"{q:.2g}"),
        effect=[f"{e:+.3g} [{lo:+.3g}, {hi:+.3g}]" for e, lo, hi in
                zip(table.effect, table.effect_lo, table.effect_hi, strict=True)],
        valid=table.valid.map({True: "yes", False: "**no**"}))
    default = shown[(shown.excluded == "") & (shown.unproven == "")]
    apart = {kind: [f"- `{r.scenario}` ({r.metric} {r.direction}: effect {r.effect}, "
                    f"p = {r.p_value}, q = {r.q_value}): {getattr(r, kind)}"
                    for r in shown[shown[kind] != ""].itertuples()]
             for kind in ("unproven", "excluded")}
    kernels = table.get("cpu_kernels", pd.Series(dtype=str)).fillna("unrecorded").value_counts()
    return render(
        "validity", command=command, seeds=int(table.seeds.min()) if len(table) else 0,
        powered_seeds=len(POWERED_SEEDS), alpha=ALPHA, carried=carried,
        rows=len(table) + len(healthy),
        kernels=", ".join(f"{kind} ({n} rows)" for kind, n in kernels.items()),
        valid=int((default.valid == "yes").sum()), default=len(default),
        default_table=markdown(default[["scenario", "bug", "model", "metric", "direction",
                                         "control", "effect", "p_value", "q_value", "valid"]]),
        **apart, health=_health_block(healthy), language=_language_block(language),
        health_margin=f"{HEALTH_MARGIN:.2f}", entropy_margin=ENTROPY_MARGIN,
        generation_margin=GENERATION_MARGIN)


def _health_block(healthy: pd.DataFrame) -> dict | None:
    if not len(healthy):
        return None
    variants = healthy[healthy.role == "variant"]
    shown = healthy.assign(
        **{c: healthy[c].map("{:.3f}".format)
           for c in ("mean_val_acc", "min_val_acc", "default_val_acc", "max_val_loss",
                     "default_val_loss")},
        healthy=healthy.healthy.map({True: "yes", False: "**no**", None: "(control)"}))
    return {"healthy": int((variants.healthy == True).sum()),  # noqa: E712
            "variants": len(variants),
            "table": markdown(shown[["scenario", "role", "description", "mean_val_acc",
                                     "min_val_acc", "default_val_acc", "max_val_loss",
                                     "default_val_loss", "judged_by", "healthy"]])}


def _language_block(language: pd.DataFrame | None) -> dict | None:
    if language is None or not len(language):
        return None
    shown = language.assign(**{c: language[c].map("{:.3f}".format) for c in (
        "final_val_loss", "entropy_floor", "excess", "generation_gap")},
        within=language.within.map({True: "yes", False: "**no**"}))
    return {"within": int(language.within.sum()), "seeds": len(language),
            "table": markdown(shown[["seed", "final_val_loss", "entropy_floor", "excess",
                                     "generation_gap", "within"]])}


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results validate", description=__doc__.splitlines()[0],
                       parents=[sweep_parser()])
    p.add_argument("overrides", nargs="*", help="run-setting overrides, e.g. harness.steps=100")
    p.add_argument("--runs", default="results/runs/validity", help="where runs are stored")
    p.add_argument("--out", default="results", help="where validity.md/.csv are written")
    p.add_argument("--changed", action="store_true",
                   help="run only the scenarios whose code changed since the tables in --out "
                   "were written; carry the other rows, whose runs the same code decides")
    args = p.parse_intermixed_args(argv)
    options = sweep_options(args, VALIDITY_SEEDS)
    if len(options.seeds) < 5:
        log.warning("fewer than 5 seeds: p < %.2g may be out of reach", ALPHA)
    root = store.ensure_writable(Path(args.runs))
    chosen = [s.id for s in select_scenarios(options.patterns, include_excluded=True)]
    carried = (carried_rows(Path(args.out), chosen, options.seeds, args.overrides)
               if args.changed else Carried(*[pd.DataFrame()] * 3))
    if args.changed:
        log.info("carried: %d of %d scenarios, whose code is unchanged",
                 len(carried.scenarios), len(chosen))
    to_run = [sid for sid in chosen if sid not in carried.scenarios]
    plan = (plan_validity_runs(root, to_run, options.seeds, args.overrides, health=True)
            if to_run else ValidityPlan([], [], []))
    sweep(plan.tasks, options.workers, progress=options.progress)
    table = summarise(root, plan.buggy, options.seeds)
    if powered := to_power(table, options.seeds):
        log.info("not valid, with an effect interval that excludes 0: tested again over %d "
                 "seeds: %s", len(POWERED_SEEDS), ", ".join(powered))
        more = plan_validity_runs(root, powered, POWERED_SEEDS, args.overrides)
        sweep(more.tasks, options.workers, progress=options.progress)
        table = summarise(root, plan.buggy, options.seeds,
                          dict.fromkeys(powered, POWERED_SEEDS))
    healthy = health_table(root, plan.clean, options.seeds)
    language = (language_table(root, options.seeds)
                if any(s.id == default_scenario("gpt").id for s in plan.clean) else None)
    kernels = cpu_kernels()  # the rows made here; carried ones keep theirs
    table, healthy, language = (None if t is None else t.assign(cpu_kernels=kernels)
                                for t in with_keys(table, healthy, language, options.seeds,
                                                   args.overrides))
    if language is None and len(carried.language):
        language = carried.language
    made = len(table) + len(healthy)
    table = with_q_values(merged(table, carried.validity))
    healthy = merged(healthy, carried.health)
    write_tables(table, healthy, Path(args.out), command_line("results validate", argv), language,
                 carried=len(table) + len(healthy) - made)
    included = table[(table.excluded == "") & (table.unproven == "")] if len(table) else table
    print(f"{int(included.valid.sum()) if len(table) else 0} of {len(included)} default-sweep "
          f"scenarios valid -> {args.out}/validity.md")
    if len(table) and len(invalid := included[~included.valid]):
        print("invalid: " + ", ".join(invalid.scenario))
    marked = table[table.unproven != ""] if len(table) else table
    if len(marked) and len(shown := marked[marked.valid]):
        print("unproven but valid (remove their `unproven:` mark): " + ", ".join(shown.scenario))
    variants = healthy[healthy.role == "variant"] if len(healthy) else healthy
    if len(variants) and len(sick := variants[variants.healthy == False]):  # noqa: E712
        print("unhealthy variants: " + ", ".join(sick.scenario))
    if language is not None and not language.within.all():
        print("the language model missed its margins on seeds "
              + ", ".join(map(str, language.seed[~language.within])))
    return 0
