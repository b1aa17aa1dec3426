"""README and the guides stay true to the code and to results/: the catalogue tables, the two
set-up commands, and every figure they quote."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bugzoo.judge.tables import markdown
from bugzoo.teach.catalogue import bugs_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
README = (ROOT / "README.md").read_text()
PAGES = ROOT / "docs" / "pages"
SCORING = (PAGES / "scoring.md").read_text()
SPEED = (PAGES / "speed.md").read_text()


def flat(text: str) -> str:
    """``text`` on one line: figures may wrap."""
    return " ".join(text.split())


def interval(row: pd.Series, key: str) -> str:
    return f"{row[key]:.2f} [{row[f'{key}_lo']:.2f}, {row[f'{key}_hi']:.2f}]"


def board() -> pd.DataFrame:
    return pd.read_csv(RESULTS / "leaderboard.csv").set_index("detector")


def test_catalogue_table_matches_registry():
    page = (PAGES / "catalogue.md").read_text()
    block = re.search(r"<!-- catalogue:start -->\n(.*?)\n<!-- catalogue:end -->", page, re.S)
    assert block, "docs/pages/catalogue.md lost its catalogue markers"
    assert block.group(1).strip() == markdown(bugs_table()).strip(), (
        "the catalogue page is stale: regenerate with `bugzoo list bugs --markdown`")


def test_readme_category_overview_matches_registry():
    """README's short table: every category with its number of bugs, and examples of its own."""
    block = re.search(r"<!-- categories:start -->\n(.*?)\n<!-- categories:end -->", README, re.S)
    assert block, "README lost its category markers"
    table = bugs_table()
    rows = [r.strip("|").split("|") for r in block.group(1).splitlines()[2:]]
    quoted = {c.strip(): (int(n), re.findall(r"`(\w+)`", ex)) for c, n, ex in rows}
    assert list(quoted) == sorted(table["category"].unique())
    for category, (count, examples) in quoted.items():
        mine = set(table.loc[table["category"] == category, "id"])
        assert count == len(mine) and examples and set(examples) <= mine, category
    assert f"{len(table)} bugs in {len(quoted)} categories" in README


def test_ci_runs_readme_test_command():
    commands = re.findall(r"```bash\n(.*?)\n```", README.split("## Commands")[0], re.S)
    assert len(commands) == 2, "README's quick start must show exactly two commands"
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1].strip() in ci


def sweep_time() -> tuple[float, int, int]:
    """The reference sweep's minutes on its cores and its runs, every run's time recorded (the
    test split of a release runs the plan of its published dev runs; a board of an older
    release, which README names, ran that release's plan)."""
    sweep = pd.read_csv(RESULTS / "sweep_time.csv")
    runs = int(sweep["runs_made"].sum())
    traces = pd.read_parquet(RESULTS / "traces" / "runs.parquet")
    if set(pd.read_parquet(RESULTS / "outcomes.parquet")["release"]) == set(traces["release"]):
        assert runs == len(traces)
    return sweep["wall_s"].sum() / 60, int(sweep["cpus"].iloc[0]), runs


def planned_bench_runs(lite: bool = False) -> int:
    """How many runs ``bugzoo bench --full`` (or, with ``lite``, a plain ``bugzoo bench``)
    plans on this CPU-only checkout: every scenario it sweeps (Lite's frozen ones), on as many
    seeds, each buggy run beside its twin, the decoy pairs, with the default detectors."""
    from bugzoo.detector_registry import select_detectors
    from bugzoo.harness.sweep import parse_seeds, plan_runs, select_scenarios
    from bugzoo.judge.bench import BENCH_SEEDS
    from bugzoo.judge.lite import frozen_scenarios

    scenarios = frozen_scenarios() if lite else select_scenarios(None, device="cpu",
                                                                   controls=False)
    seeds = [0] if lite else parse_seeds(BENCH_SEEDS)
    return len(plan_runs(scenarios, seeds, [], select_detectors(["default"]), Path("unused"),
                         1.0, pairs=True, collect=True))


def suite_rows(b: pd.DataFrame) -> str:
    """The headline table's rows of docs/pages/scoring.md, from the leaderboard."""
    suite = b.loc["suite: built-ins"]
    judged = int(suite["hits"] + suite["misses"])
    scores = [("always_alarm", "never_alarm", "random_alarm"),
              ("settings_reader", "trace_memoriser")]
    rows = [
        f"| `suite: built-ins`, score | {interval(suite, 'score')} |",
        f"| `suite: generic`, score | {interval(b.loc['suite: generic'], 'score')} |",
        f"| `suite: built-ins`, recall | {interval(suite, 'recall')} ({int(suite['hits'])} "
        f"hits of {judged} judged pairs, {int(suite['early'])} early) |",
        f"| `suite: built-ins`, control alarms | "
        f"{interval(suite, 'matched_false_alarm_rate')} ({int(suite['control_alarms'])} of "
        f"{judged} twins) |",
        f"| `suite: built-ins`, healthy false alarms | "
        f"{interval(suite, 'healthy_false_alarm_rate')} ({int(suite['false_alarms'])} of "
        f"{int(suite['clean_runs'])} runs) |",
        f"| `suite: built-ins`, diagnosis accuracy | {interval(suite, 'diagnosis_accuracy')} |",
        f"| `suite: built-ins`, median delay, bugs from step 0 / mid-run bugs | "
        f"{suite['median_delay_steps']:g} / {suite['median_delay_steps_midrun']:g} steps |",
        f"| `suite: built-ins`, a run's time with the suite / the bare loop's | "
        f"{suite['overhead']:.2f} x |",
        *(f"| {' / '.join(f'`{d}`' for d in names)}, score | "
          f"{' / '.join(interval(b.loc[d], 'score') for d in names)} |" for names in scores)]
    return "\n".join(rows)


def test_readme_headline_figures_match_committed_results():
    """README's leaderboard, validity and GPU lines are the figures in results/."""
    text = flat(README)
    b = board()
    suite = b.loc["suite: built-ins"]
    assert (f"{int(suite['pairs'])} pairs of buggy and control runs over {int(suite['bugs'])} "
            f"silent bugs, and {int(suite['clean_runs'])} runs of healthy variants") in text
    assert f"suite of {int((b['role'] == 'heuristic').sum())} heuristics" in text
    assert f"scores **{interval(suite, 'score')}**" in text
    assert (f"Its recall is {interval(suite, 'recall')} and its control alarms "
            f"{interval(suite, 'matched_false_alarm_rate')}; on healthy variants it alarms on "
            f"{interval(suite, 'healthy_false_alarm_rate')} of runs") in text
    from bugzoo.judge.scoring import HEALTHY_LIMIT

    above = suite["healthy_false_alarm_rate"] > HEALTHY_LIMIT
    assert (f"of runs, above the board's flag at {HEALTHY_LIMIT}" in text) == above, (
        "README says whether the suite's healthy false-alarm rate is above the board's flag")
    for names in (("always_alarm", "never_alarm", "random_alarm"),
                  ("settings_reader", "trace_memoriser")):
        assert " / ".join(interval(b.loc[d], "score") for d in names) in text, names
    nothing = ["always_alarm", "never_alarm", "random_alarm", "trace_memoriser"]
    assert all(b.loc[d, "score_lo"] <= 0 <= b.loc[d, "score_hi"] for d in nothing), (
        "a row that detects nothing must score about 0 within its interval")
    # reading the setup scores exactly 0 on the headline; the bugs visible at setup, where its
    # mirror would win, are quoted apart (test_settings_reader_and_its_mirror_are_quoted_...)
    assert (b.loc["settings_reader", ["score", "score_lo", "score_hi"]] == 0).all()
    visible = pd.read_csv(RESULTS / "leaderboard_visible.csv").set_index("detector")
    shown = visible.loc["suite: built-ins"]
    assert f"For {int(shown['bugs'])} more silent bugs the mistake is a setting" in text
    assert (f"the suite scores {interval(shown, 'score')} on them, and the defaults reader's "
            f"mirror +{interval(settings_mirror('visible'), 'score')}") in text
    split = pd.read_csv(RESULTS / "out_of_sample.csv").set_index(["bug_set", "detector"])
    tuned, unseen = split.loc["tuned-on", "suite: built-ins"], split.loc["unseen", "suite: built-ins"]
    assert (f"scores {interval(tuned, 'score')} on the {int(tuned['bugs'])} bugs it was tuned on "
            f"and {interval(unseen, 'score')} on the {int(unseen['bugs'])} it never saw") in text
    old = pd.read_csv(RESULTS / "history" / "leaderboard-0.1.csv").set_index("detector")
    assert f"The 0.1 board's {interval(old.loc['suite: built-ins'], 'score')}" in text
    minutes, cores, made = sweep_time()
    assert f"The sweep took {minutes:.0f} min on {cores} cores." in text
    # the main command's plan (Lite) and the full board's, counted as bench plans them (a
    # release that adds scenarios grows the full plan before its board is swept again), what
    # the Lite sweep took, how Lite agrees with the full board, and what the published full
    # board's plan took
    lite_time = pd.read_csv(RESULTS / "lite" / "sweep_time.csv")
    assert lite_time["runs_made"].sum() == planned_bench_runs(lite=True)
    assert (f"({planned_bench_runs(lite=True):,} runs and the overhead pairs, "
            f"{lite_time['wall_s'].sum() / 60:.0f} minutes on "
            f"{int(lite_time['cpus'].iloc[0])} cores)") in text
    lite_board = pd.read_csv(RESULTS / "lite" / "leaderboard.csv").set_index("detector")
    plateau = lite_board.loc["loss_plateau"]
    suite_score = interval(lite_board.loc["suite: built-ins"], "score")
    assert (f"there the built-in suite scores {suite_score}, its sealed `loss_plateau` "
            f"{interval(plateau, 'score')}") in flat(README)
    assert plateau["scored"] == "sealed (namespaces)"
    every_zero = (lite_board["honeypot_score"].dropna() == 0).all()
    assert every_zero == ("every detector's honeypot score is 0.00" in flat(README))
    visible = pd.read_csv(RESULTS / "lite" / "leaderboard_visible.csv").set_index("detector")
    floor, suite = visible.loc["setup_reader"], visible.loc["suite: built-ins"]
    assert (f"on the Lite board's {int(floor['bugs'])} bugs visible at setup it scores "
            f"{interval(floor, 'score')}, as much as the suite's {interval(suite, 'score')}"
            ) in text
    agreement = pd.read_csv(RESULTS / "lite_agreement.csv")
    ranked = agreement[agreement["full_score"] > 0.05]
    from scipy.stats import kendalltau
    tau = kendalltau(ranked["full_score"], ranked["lite_score"]).statistic
    assert (f"Kendall's tau {tau:.3f} over the {len(ranked)} that score above 0.05, and "
            f"{int(ranked['inside'].sum())} of {len(ranked)} inside") in text
    assert (f"({planned_bench_runs():,} runs and the overhead pairs; the published board's "
            f"{made:,} runs and the overhead pairs took about {minutes:.0f} minutes on {cores} "
            "cores") in text
    validity = pd.read_csv(RESULTS / "validity.csv")
    assert f"{int(validity['valid'].sum())} manifest, and " \
        f"{int(validity['unproven'].notna().sum())} are unproven" in text
    gpu = pd.read_csv(RESULTS / "gpu" / "catalogue.csv")
    same, differs = (gpu["agreement"] == "same").sum(), gpu[gpu["agreement"] == "differs"]
    assert f"{same} of {len(gpu)} buggy scenarios (it differs for {len(differs)}, all unproven)" \
        in text and differs["latent"].all()  # results/gpu keeps the column name it was made with
    cuda = pd.read_csv(RESULTS / "gpu" / "catalogue_leaderboard.csv").set_index("detector")
    cuda = cuda.loc["suite: built-ins"]
    assert (f"scores {interval(cuda, 'score')} at seed 0 with false alarms on "
            f"{int(cuda['false_alarms'])} of {int(cuda['clean_runs'])} clean runs") in text
    mismatch = pd.read_csv(RESULTS / "gpu" / "device_mismatch.csv")
    assert mismatch["valid"].all() and f"on {len(mismatch)} of {len(mismatch)} models" in text


def test_quoted_figures_match_committed_results():
    """The leaderboard and speed figures the guides quote are the ones in results/."""
    b = board()
    suite = b.loc["suite: built-ins"]
    assert suite_rows(b) in SCORING, "the headline table should read:\n" + suite_rows(b)
    assert (f"{int(suite['bugs'])} silent bugs in {int(suite['pairs'])} pairs of buggy and "
            f"control runs, and {int(suite['clean_runs'])} runs of healthy variants") \
        in flat(SCORING)
    minutes, cores, made = sweep_time()
    assert f"its {made:,} runs and the overhead pairs, took {minutes:.0f} min on {cores} cores" \
        in flat(SCORING)
    assert f"the test split: {made:,} runs, then the overhead pairs" in SPEED
    overhead = pd.read_csv(RESULTS / "perf" / "overhead.csv")
    ratio = overhead.set_index(["variant", "model"])["median_x"]
    others = ("lstm", "transformer", "resnet", "gpt")
    suite_x = " / ".join(f"{ratio['suite: built-ins', m]:.2f}" for m in others)
    assert f"| {suite_x} x (mlp {ratio['suite: built-ins', 'mlp']:.2f} x" in SPEED
    telemetry = " / ".join(f"{ratio['telemetry', m]:.2f}" for m in ("mlp", *others))
    assert f"| {telemetry} x" in SPEED
    every, anomaly = (" / ".join(f"{ratio[variant, m]:.2f}" for m in others)
                      for variant in ("all detectors", "anomaly"))
    assert f"| {every} x (`anomaly` alone: {anomaly} x;" in SPEED
    assert "as `mode_check` does\non the gpt" in SPEED and ratio["mode_check", "gpt"] < 1
    efficiency = pd.read_csv(RESULTS / "perf" / "sweep.csv").set_index(
        ["compositions", "workers"])["efficiency"]
    assert (f"| {efficiency['kept', 2]:.2f} with every composition kept (1 worker: "
            f"{efficiency['kept', 1]:.2f}); {efficiency['composed', 2]:.2f} when each worker "
            f"composes each scenario first (1 worker: {efficiency['composed', 1]:.2f})") in SPEED
    whole, seconds = divmod(round(minutes * 60), 60)
    assert f"| {whole} min {seconds:02d} s on {cores} cores |" in SPEED
    lite = pd.read_csv(RESULTS / "lite" / "sweep_time.csv")
    whole, seconds = divmod(round(lite["wall_s"].sum()), 60)
    assert (f"Lite, a plain `bugzoo bench`: {int(lite['runs_made'].sum())} runs on a fresh test "
            "split") in SPEED
    assert f"| {whole} min {seconds:02d} s on {int(lite['cpus'].iloc[0])} cores | <= 15 min |" \
        in SPEED
    rescore = pd.read_csv(RESULTS / "perf" / "rescore.csv").iloc[0]
    assert (f"on {int(rescore['runs']):,} stored traces" in SPEED
            and f"| {rescore['sealed_s']:.1f} s sealed on {int(rescore['workers'])} workers "
            f"({rescore['in_process_s']:.1f} s in one process, unconfined: "
            f"{rescore['ratio']:.2f} x) | <= 60 s |" in SPEED)


def test_the_boards_overhead_is_the_run_weighted_paid_overhead():
    """The suite's overhead column is overhead.csv's per-model ``paid_x``, weighted by the
    model's share of the scored runs (the published outcomes: one row per run and detector)."""
    runs = pd.read_parquet(RESULTS / "outcomes.parquet")
    silent = runs[~runs["loud"] & ~runs["unproven"] & (runs["detector"] == "nonfinite")]
    weights = silent.groupby("model").size()
    paid = pd.read_csv(RESULTS / "overhead.csv").set_index(["variant", "model"])["paid_x"]
    expected = sum(paid["suite: built-ins", m] * n for m, n in weights.items()) / weights.sum()
    assert board().loc["suite: built-ins", "overhead"] == pytest.approx(expected, abs=0.005)


def test_the_language_model_is_quoted_as_measured():
    """README's causal-LM lines: its margins over 5 seeds (results/language.csv) and the frozen
    detectors on the bugs that joined with it (results/out_of_sample.csv)."""
    from bugzoo.judge.validity import ENTROPY_MARGIN, GENERATION_MARGIN

    text = flat(README)
    language = pd.read_csv(RESULTS / "language.csv")
    assert (f"`gpt` ends {language['excess'].min():.2f}-{language['excess'].max():.2f} nats "
            f"above the entropy of the language it learns on {int(language['within'].sum())} "
            f"of {len(language)} seeds (margin {ENTROPY_MARGIN})") in text
    assert (f"the source scores the sentences it writes within "
            f"{language['generation_gap'].max():.2f} nats of its holdout loss (margin "
            f"{GENERATION_MARGIN})") in text
    from bugzoo.bugs import list_bugs

    on_gpt = [b for b in list_bugs() if "gpt" in b.models]
    classic = [b for b in on_gpt if b.since != "1.2"]
    assert f"Its {len(on_gpt) - len(classic)} LLM-era bugs" in text.replace("eight", "8")
    assert f"{len(classic)} of the classic bugs run on it too" in text
    split = pd.read_csv(RESULTS / "out_of_sample.csv").set_index(["bug_set", "detector"])
    new = split.loc["joined 1.2", "suite: built-ins"]
    assert (f"on the {int(new['bugs'])} silent bugs 1.2 added with the causal LM it scores "
            f"{interval(new, 'score')}, recall {interval(new, 'recall')}") in text
    page = (RESULTS / "out_of_sample.md").read_text()
    rows = dict(re.findall(r"^\| (the models they were tuned on|models that joined later \(gpt\)) "
                           r"\| suite: built-ins \| (\d+ \(\d+\) \| [^|]+) \|", page, re.M))
    (bugs, score), (_, tuned) = (rows[k].split(" | ") for k in (
        "models that joined later (gpt)", "the models they were tuned on"))
    count, pairs = bugs.replace("(", "").replace(")", "").split()
    assert (f"it catches about as well as on the models it was tuned on: {score} over {count} bugs "
            f"({pairs} pairs), against {tuned}") in text


def test_quoted_validity_figures_match_committed_results():
    """The validity section's counts, weakest q-values and measured effects are validity.csv's."""
    text = flat(SCORING)
    validity = pd.read_csv(RESULTS / "validity.csv").set_index("scenario")
    valid = validity[validity["valid"]]
    assert f"**{len(valid)} of {len(valid)} default-sweep scenarios manifest**" in text
    assert f"q-values run across all {len(validity)} scenarios" in text
    weakest = valid.sort_values("q_value").tail(2)
    assert f"`{'` and `'.join(sorted(weakest.index))}` (q = {weakest['q_value'].max():.3f})" \
        in text
    for scenario in ("transformer-mask_after_softmax", "mlp-leakage_feature_selection"):
        row = validity.loc[scenario]
        assert (f"{row['effect']:+.3f} [{row['effect_lo']:+.3f}, {row['effect_hi']:+.3f}]"
                in text), scenario
    assert f"**Unproven** ({int(validity['unproven'].notna().sum())} scenarios" in text
    ddp = validity.loc["resnet-ddp_unsynced"]
    assert f"+{ddp['effect']:.3f} validation loss, p = {ddp['p_value']:.3f}" in text


def test_quoted_tool_scores_are_in_tools_md():
    """Every score interval the Real tools section quotes is a row of results/tools.md."""
    section = flat(SCORING.split("## Real tools")[1].split("\n## ")[0])
    tools = flat((RESULTS / "tools.md").read_text())
    quoted = re.findall(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]", section)
    assert len(quoted) >= 4
    assert [q for q in quoted if q not in tools] == []


def test_quoted_reliability_figures_match_the_tests():
    """The Reliability page's figures are the constants the reliability tests run with."""
    import test_reliability

    page = (PAGES / "reliability.md").read_text()
    kills = test_reliability.KILLS
    assert f"**Injected faults: {test_reliability.FAULT_CASES} cases" in page
    assert f"**Crash and resume: {kills} `kill -9` at seeded random points, {kills} resumes" \
        in page


def test_quoted_category_recalls_match_committed_results():
    """The per-category recall line is the suite's rows of leaderboard_categories.csv."""
    table = pd.read_csv(RESULTS / "leaderboard_categories.csv")
    suite = table[table["detector"] == "suite: built-ins"].sort_values("category")
    quoted = ", ".join(f"{r.category} {r.recall:.2f} ({r.bugs})" for r in suite.itertuples())
    assert quoted in flat(SCORING), f"the category line should read: {quoted}"


def test_the_clean_baselines_are_quoted_as_measured():
    """Scoring's wall times and overfit steps of the clean runs are ``results/perf/baselines``."""
    table = pd.read_csv(RESULTS / "perf" / "baselines.csv").set_index("model")
    wall, step = table["wall_s_median_of_3"], table["overfit_step_within_0.05"]
    text = flat(SCORING)
    assert ("(`bugzoo perf baselines`, 1 thread): " + ", ".join(
        f"{m} {wall[m]:g} s" for m in table.index) + ".") in text
    assert (f"Single-batch overfit reaches loss < 0.05 at step {step['mlp']} (mlp), "
            f"{step['lstm']} (lstm), {step['transformer']} (transformer) and {step['resnet']} "
            f"(resnet); the gpt's comes within 0.05 of its batch's floor at step {step['gpt']}."
            ) in text
    language = flat((PAGES / "language_model.md").read_text())
    assert f"clean on its defaults, in {wall['gpt']:g} s on one thread" in language


def test_where_the_time_goes_is_the_published_runs_wall_time():
    """Speed's run-time breakdown is ``wall_s`` of the published dev runs."""
    runs = pd.read_parquet(RESULTS / "traces" / "runs.parquet")
    share = runs.groupby("role")["wall_s"].sum() / runs["wall_s"].sum()
    per_scenario = runs.groupby("scenario")["wall_s"].mean()
    two_ranks = per_scenario[[s for s in per_scenario.index
                              if s.endswith(("ddp_unsynced", "rank_skip"))]]
    text = flat(SPEED)
    assert (f"The published dev sweep's {len(runs):,} runs (`wall_s` in "
            f"`results/traces/runs.parquet`") in text
    assert f"add up to {runs['wall_s'].sum():.0f} s of run time" in text
    # no sweep of those runs on 2 workers is shorter than half their sum
    assert f"on 2 workers a sweep of them takes at least {runs['wall_s'].sum() / 2 / 60:.0f} min" \
        in text
    assert (f"are {share['control']:.0%} of it and the healthy variants "
            f"{share['clean']:.0%}") in text
    assert f"`loss_tensor_kept`, {per_scenario['transformer-loss_tensor_kept']:.0f} s a run" \
        in text
    assert f"{two_ranks.min():.0f}-{two_ranks.max():.0f} s a run" in text


def test_the_suites_misses_and_false_alarms_are_the_published_outcomes():
    """Every count the misses section quotes is the suite's outcomes on the published runs."""
    from bugzoo.judge.outcomes import with_suites
    from bugzoo.judge.scoring import apart_kind, silent

    table = silent(with_suites(pd.read_parquet(RESULTS / "outcomes.parquet")))
    suite = table[table["detector"] == "suite: built-ins"]
    section = flat(SCORING.split("## What the suite misses")[1].split("\n## ")[0])
    buggy, twins = suite[suite["run_role"] == "buggy"], suite[suite["run_role"] == "control"]
    healthy = suite[suite["run_role"] == "clean"]
    missed = buggy[buggy["outcome"] == "miss"]
    assert f"misses **{len(missed)} of {len(buggy)}** buggy runs" in section
    for scenario, n in missed.groupby("scenario").size().items():
        assert f"`{scenario}` ({n})" in section, scenario
    everything = with_suites(pd.read_parquet(RESULTS / "outcomes.parquet"))
    visible = everything[(apart_kind(everything) == "visible")
                         & (everything["detector"] == "suite: built-ins")
                         & (everything["run_role"] == "buggy")]
    unseen = visible[visible["outcome"] == "miss"]
    assert f"it misses {len(unseen)} of {len(visible)} buggy runs" in section
    assert all(f"`{scenario}`" in section for scenario in unseen["scenario"].unique())
    members = table[(table["role"] == "heuristic") & (table["outcome"] == "false_alarm")]
    for runs, quoted in ((twins, f"alarms on **{{}} of {len(twins)}** twins"),
                         (healthy, f"it alarms on **{{}} of {len(healthy)}** runs")):
        alarmed = runs[runs["outcome"] == "false_alarm"]
        parts = section.split(quoted.format(len(alarmed)))
        assert len(parts) == 2, quoted.format(len(alarmed))
        # each alarmed run once, under the member that alarmed first, right after the count
        first = members.merge(alarmed[["scenario", "seed", "run_role", "alarm_step"]])
        assert first["scenario"].nunique() and len(first) == len(alarmed)
        for detector, alarms in first.groupby("detector"):
            assert f"`{detector}` ({len(alarms)})" in parts[1], (detector, len(alarms))
        if runs is twins:  # the steps the twins' alarms came at, as quoted
            for _, alarms in first.groupby("detector"):
                lo, hi = int(alarms["alarm_step"].min()), int(alarms["alarm_step"].max())
                assert f"step {lo}" + (f"-{hi}" if hi > lo else "") in parts[1], (lo, hi)


def out_of_sample_rows() -> str:
    """The out-of-sample table of docs/pages/scoring.md, from results/out_of_sample.csv: the
    bugs the detectors were tuned on, every later bug, and each later release's apart."""
    table = pd.read_csv(RESULTS / "out_of_sample.csv").set_index(["bug_set", "detector"])
    releases = sorted(b.split()[1] for b in table.index.levels[0] if b.startswith("joined "))
    sets = [table.loc["tuned-on"], table.loc["unseen"],
            *(table.loc[f"joined {r}"] for r in releases)]
    suite = "suite: built-ins"
    header = ["tuned on: 1.0's bugs", "unseen: all later bugs",
              *(f"of which {r}'s" for r in releases)]
    rows = ["| | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|",
            "| silent bugs (pairs) | " + " | ".join(
                f"{int(t.loc[suite, 'bugs'])} ({int(t.loc[suite, 'pairs'])})"
                for t in sets) + " |"]
    for detector, key, label in ((suite, "score", "score"), (suite, "recall", "recall"),
                                 (suite, "matched_false_alarm_rate", "control alarms"),
                                 ("suite: generic", "score", "score")):
        rows.append(f"| `{detector}`, {label} | "
                    + " | ".join(interval(t.loc[detector], key) for t in sets) + " |")
    return "\n".join(rows)


def test_the_out_of_sample_table_is_the_committed_split():
    block = re.search(r"<!-- out-of-sample:start -->\n(.*?)\n<!-- out-of-sample:end -->",
                      SCORING, re.S)
    assert block and block.group(1) == out_of_sample_rows(), (
        "the out-of-sample table should read:\n" + out_of_sample_rows())


def settings_mirror(kind: str) -> pd.Series:
    """The board's row of ``settings_reader``'s mirror, an alarm at step 0 on exactly the runs
    it leaves quiet (off the model's defaults), scored by the board's own code on the published
    outcomes: over the pairs of the headline (``kind`` "") or of the bugs visible at setup
    ("visible"), and the healthy runs."""
    from bugzoo.judge.scoring import apart_kind, detector_row

    table = pd.read_parquet(RESULTS / "outcomes.parquet")
    table = table[(apart_kind(table) == kind) | (table["run_role"] == "clean")]
    runs = table[table["detector"] == "settings_reader"].copy()
    alarmed = runs["outcome"].isin(["hit", "false_alarm", "early"])
    buggy = runs["run_role"] == "buggy"
    before_onset = (runs["onset"].fillna(0) > 0) & (runs["run_role"] != "clean")
    runs["outcome"] = np.where(alarmed, np.where(buggy, "miss", "quiet"),
                               np.where(before_onset, "early",
                                        np.where(buggy, "hit", "false_alarm")))
    runs["alarm_step"] = np.where(alarmed, np.nan, 0.0)
    runs["delay_steps"] = np.where(runs["outcome"] == "hit", 0.0, np.nan)
    runs["diagnosed"] = False
    return pd.Series(detector_row(runs))


def test_settings_reader_and_its_mirror_are_quoted_as_measured():
    """On the headline, reading the setup scores exactly 0 either way round; on the bugs
    visible at setup the mirror scores while detecting nothing, and only the healthy column
    flags it. The page quotes both as measured."""
    headline, mirror = settings_mirror(""), settings_mirror("visible")
    text = flat(SCORING)
    reader = board().loc["settings_reader"]
    assert reader["score"] == headline["score"] == 0 and reader["score_hi"] == 0
    assert f"`settings_reader` scores {interval(reader, 'score')} there, and so does its " \
        "mirror" in text
    suite = pd.read_csv(RESULTS / "leaderboard_visible.csv").set_index("detector").loc[
        "suite: built-ins"]
    assert (f"On the {int(suite['bugs'])} bugs visible at setup the suite scores "
            f"{interval(suite, 'score')}, while the mirror scores +{interval(mirror, 'score')} "
            "on those pairs") in text
    assert mirror["score_lo"] > 0, "the mirror must win there: the reason for the apart board"
    assert (f"alarms on {mirror['false_alarms']} of their {mirror['clean_runs']} runs, a "
            f"healthy false-alarm rate of {interval(mirror, 'healthy_false_alarm_rate')}") in text
    assert mirror["flag"], "the board must flag the mirror's healthy false alarms"


def moves_table() -> str:
    """Each detector's score on the 0.1 board beside the 1.0 board, in the 1.0 board's order."""
    old = pd.read_csv(RESULTS / "history" / "leaderboard-0.1.csv").set_index("detector")
    new = pd.read_csv(RESULTS / "history" / "leaderboard-1.0.csv").set_index("detector")
    rows = ["| detector | 0.1: dev seeds, every clean run | 1.0: test split, paired |",
            "|---|---|---|"]
    for detector, row in new.iterrows():
        before = interval(old.loc[detector], "score") if detector in old.index else "–"
        rows.append(f"| `{detector}` | {before} | {interval(row, 'score')} |")
    return "\n".join(rows)


def test_the_moves_from_0_1_are_both_boards():
    assert moves_table() in SCORING, "the moves table should read:\n" + moves_table()


def test_the_sweep_profile_and_efficiency_are_quoted_as_measured():
    """Speed's profile section and row (c) are ``results/perf/profile*.csv`` and ``sweep.csv``."""
    phases = pd.read_csv(RESULTS / "perf" / "profile.csv").set_index("phase")["share"]
    slots = pd.read_csv(RESULTS / "perf" / "profile_sweep.csv").set_index("part")

    def phase(start: str) -> str:
        return f"{phases[next(p for p in phases.index if p.startswith(start))]:.0%}"

    def slot(start: str, column: str = "share_of_slots") -> float:
        return float(slots.loc[next(p for p in slots.index if p.startswith(start)), column])

    text = flat(SPEED)
    assert f"The {phases.index[-1].split()[1]} pooled runs, one after another" in text
    assert (f"training steps take {phase('training steps')} of their time, telemetry "
            f"{phase('telemetry')}, the detectors' calls {phase('detector calls')}, Hydra's "
            f"composition {phase('composition')} and the loop's own code between the phases "
            f"{phase('the rest')}") in text
    small = sorted({phase(p) for p in ("build", "evaluation", "the twin run", "writing")})
    assert f"the run folder take {'-'.join(small).replace('%-', '-')}" in text
    assert phase("data generation") == "0%"
    assert (f"pooled runs hold {slot('held by pooled'):.0%} of the slot time (wall time x "
            f"workers), isolated runs {slot('held by isolated'):.0%}, and slots stand idle for "
            f"{slot('idle'):.0%}") in text
    side_by_side = slot("held by pooled", "seconds") / slot("for comparison", "seconds") - 1
    change = f"{abs(side_by_side):.0%} {'longer' if side_by_side >= 0 else 'less time'}"
    assert f"the pooled runs take {change} side by side" in text
    sweep = pd.read_csv(RESULTS / "perf" / "sweep.csv").set_index(["compositions", "workers"])
    runs = sorted(f"{s:.0f}" for s in sweep["sum_run_s"])
    assert (f"The same {sweep['runs'].iloc[0]} runs added up to {runs[0]} to {runs[-1]} s of run "
            "time in four sweeps minutes apart") in text


def test_telemetry_per_step_is_quoted_as_measured():
    """Speed's telemetry breakdown is ``results/perf/profile_telemetry.csv``."""
    table = pd.read_csv(RESULTS / "perf" / "profile_telemetry.csv").set_index("us_per_step")

    def us(start: str, model: str = "mlp") -> float:
        return table.loc[next(p for p in table.index if p.startswith(start)), model]

    text = flat(SPEED)
    assert (f"On the mlp, a step's telemetry takes {us('telemetry, all'):.0f} us beside a "
            f"{us('training step'):.0f}-us training step ({us('step with telemetry'):.2f} x): "
            f"gradient statistics {us('gradient statistics'):.0f} us, parameter and update "
            f"norms {us('parameter and update'):.0f}, resident memory "
            f"{us('resident memory'):.0f}, the heap in use {us('heap in use'):.0f}, the "
            f"observation and its row {us('the observation') + us('the trace row'):.0f}") in text
    others = " / ".join(f"{us('step with telemetry', m):.2f}"
                        for m in ("lstm", "transformer", "resnet"))
    assert f"they come to {others} x" in text
    # the step with telemetry less the gradient statistics and the two memory readings
    signals = us("gradient statistics") + us("resident memory") + us("heap in use")
    floor = (us("training step") + us("telemetry, all") - signals) / us("training step")
    assert (f"both memory readings, what is left (the parameter and update norms, the "
            f"observation and its row) would still come to {floor:.2f} x on the mlp") in text


def test_a_detector_that_breaks_on_the_causal_lm_is_named_as_measured():
    """README and the scoring page say that ``overfit_probe`` fails at setup on every causal-LM
    run exactly while the published outcomes show it."""
    outcomes = pd.read_parquet(RESULTS / "outcomes.parquet")
    probe = outcomes[(outcomes["detector"] == "overfit_probe") & (outcomes["model"] == "gpt")]
    failed_on_every_run = bool(len(probe)) and bool(
        probe["detector_error"].fillna("").str.startswith("setup:").all())
    assert ("`overfit_probe` fails at setup on every causal-LM run" in flat(README)) \
        == failed_on_every_run
    assert ("fails at setup on every causal-LM run" in flat(SCORING)) == failed_on_every_run
