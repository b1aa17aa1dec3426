"""Find-and-fix tasks: the folder names nothing of the bug, the grader retrains and measures on
its own fresh data, the unchanged script fails and the key's fix passes."""

from __future__ import annotations

import importlib
import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import named

from bugzoo.cli import main as cli
from bugzoo.paths import CACHE_ENV
from bugzoo.scenarios import get_scenario
from bugzoo.teach.export import render, render_clean, supported
from bugzoo.teach.tasks import cache, exported, health, sealed_runs
from bugzoo.teach.tasks import grade as grade_module
from bugzoo.teach.tasks import runner as runner_module
from bugzoo.teach.tasks.grade import grade, why_not_kept
from bugzoo.teach.tasks.interview import difficulty, hints
from bugzoo.teach.tasks.rules import diagnose, repair
from bugzoo.teach.tasks.runner import Trained
from bugzoo.teach.tasks.script import seeded, task_scripts
from bugzoo.teach.tasks.sealed_runs import SealedRun
from bugzoo.teach.tasks.solvers import noop, oracle, oracle_variant

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = "mlp-double_softmax"


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("task")
    assert cli(["task", "make", SCENARIO, "--out", str(root / "task"), "--key",
                str(root / "key")]) == 0
    return root / "task", root / "key"


def test_a_task_made_again_reads_its_runs_from_the_cache(task, tmp_path, monkeypatch):
    folder, _ = task
    monkeypatch.setattr(runner_module, "ScriptProcess", None)  # any training would fail
    assert cli(["task", "make", SCENARIO, "--out", str(tmp_path / "task"), "--key",
                str(tmp_path / "key")]) == 0
    for name in ("REPORT.md", "trace.csv", "train.py"):
        assert (tmp_path / "task" / name).read_text() == (folder / name).read_text()


def test_the_task_folder_shows_the_symptom_and_names_nothing(task):
    folder, key = task
    assert {p.name for p in folder.iterdir()} == {"train.py", "REPORT.md", "trace.csv",
                                                  "curves.png"}
    text = " ".join(p.read_text().lower() for p in folder.iterdir() if p.suffix != ".png")
    assert not (found := named(text, "double_softmax")), found
    assert "bugzoo" not in text and SCENARIO not in text
    report = (folder / "REPORT.md").read_text()
    assert re.search(r"validation loss at the end is \*\*[0-9.]+\*\*; last month's version "
                     r"of this script reached \*\*[0-9.]+\*\*", report), report
    assert json.loads((key / "key.json").read_text())["bug"] == "double_softmax"


@pytest.mark.slow
def test_the_unchanged_script_fails_and_the_keys_fix_passes(task, tmp_path):
    folder, key = task
    unchanged = grade(noop(folder, key, tmp_path / "noop"), key)
    assert unchanged.kept_task and not unchanged.healthy and not unchanged.solved
    assert not unchanged.diagnosed
    # the grader's own measurement on fresh data: the probabilities read as logits cost loss
    assert min(unchanged.loss) > max(unchanged.fixed_loss) + health.LOSS_MARGIN
    fixed = grade(oracle(folder, key, tmp_path / "oracle"), key)
    assert fixed.solved and fixed.accuracy == fixed.fixed_accuracy
    assert fixed.accuracy_p == fixed.loss_p == 1 / 32


def trained(cpu_s: float = 1.0, **changes) -> SealedRun:
    base = dict(seed=0, steps=200, source=torch.ones(2, 2), layers={"Linear": 3})
    return SealedRun(Trained(**{**base, **changes}), "outputs", cpu_s)


@pytest.mark.parametrize(("changes", "why"), [
    ({}, ""),
    ({"steps": 400}, "400 optimizer steps, more than the 200"),
    ({"cpu_s": 3.05}, ""),  # the budget: 3 times the fixed script's, and 0.05 s
    ({"cpu_s": 3.06}, "3.1 CPU-s on seed 0, over the task's budget of 3.0"),
    ({"steps": 100}, ""),
    ({"source": None}, "data source changed (centres)"),
    ({"source": torch.zeros(2, 2)}, "data source changed (centres)"),
    ({"layers": {"Linear": 3, "Conv1d": 1}}, "layers"),
    ({"layers": {"Linear": 5}}, ""),  # any width or depth
    ({"error": "ValueError: boom"}, "stopped with ValueError"),
])
def test_a_fix_must_keep_the_task(changes, why):
    reason = why_not_kept(trained(**changes), trained(), torch.ones(2, 2), "centres")
    assert (why in reason) if why else reason == ""


@pytest.mark.parametrize("model", ["mlp", "lstm", "transformer", "resnet", "gpt"])
def test_the_graders_data_source_and_fresh_data_are_the_scripts_own(model):
    """The grader draws a task's data source as a script seeded alike draws it (from its seed,
    or, for the causal LM's language, the same for every seed), and its fresh examples as the
    script's ``make_split`` draws them from the same generator state."""
    family = importlib.import_module(f"bugzoo.teach.reproducers.{model}")
    settings = dict(family.DEFAULTS)
    text = render_clean(model=model)
    scope: dict = {}
    exec(compile(text[:text.index("\nclass ")].replace("torch.manual_seed(0)",
                                                        "torch.manual_seed(7)"), model, "exec"),
         scope)
    assert torch.equal(scope[family.SOURCE], family.data_source(7, settings))
    one_language = model == "gpt"  # its loss floor is the language's entropy
    assert torch.equal(family.data_source(8, settings),
                       family.data_source(7, settings)) == one_language
    torch.manual_seed(11)
    *inputs, labels = scope["make_split"](64)
    fresh_inputs, fresh_labels = family.fresh_split(scope[family.SOURCE], 64, 11, settings)
    assert len(inputs) == len(fresh_inputs)
    assert all(torch.equal(a, b) for a, b in zip(inputs, fresh_inputs, strict=True))
    assert torch.equal(labels, fresh_labels)


def test_every_tasks_fixed_script_draws_the_data_the_grader_draws():
    """A delta's settings and setup edit both scripts (the spread of the blobs, the noise of
    the pictures, a feature in the loop): the grader's data source and fresh examples, made
    from the task's settings, still match what the fixed script draws."""
    from bugzoo.teach.tasks.script import family as family_of
    from bugzoo.teach.tasks.script import settings as settings_of

    for scenario in supported():
        family, settings = family_of(scenario), settings_of(scenario)
        text = render(scenario)["fixed"]
        scope: dict = {}
        exec(compile(text[:text.index("\nclass ")].replace("torch.manual_seed(0)",
                                                            "torch.manual_seed(7)"),
                     scenario, "exec"), scope)
        assert torch.equal(scope[family.SOURCE], family.data_source(7, settings)), scenario
        torch.manual_seed(11)
        *inputs, labels = scope["make_split"](16)
        fresh_inputs, fresh_labels = family.fresh_split(scope[family.SOURCE], 16, 11, settings)
        assert all(torch.equal(a, b) for a, b in zip(inputs, fresh_inputs, strict=True)), scenario
        label_noise = scenario.startswith("mlp-") and settings["NOISE"]  # graded on clean labels
        assert label_noise or torch.equal(labels, fresh_labels), scenario


def test_the_grader_retrains_and_measures_a_review_model(tmp_path, monkeypatch):
    """The grader's path for a model with several inputs and another data source: an LSTM
    script keeps its lexicon, and its model is measured on fresh (tokens, lengths) reviews."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    script = seeded(render_clean(model="lstm")).replace("= 400, 64,", "= 100, 64,")  # seconds
    key, submission = tmp_path / "key", tmp_path / "submission"
    for folder, name in ((key, "fixed.py"), (submission, "train.py")):
        folder.mkdir()
        (folder / name).write_text(script)
    (key / "key.json").write_text(json.dumps({
        "scenario": "lstm-double_softmax", "category": "loss", "seeds": [0], "eval_seed": 5,
        "settings": importlib.import_module("bugzoo.teach.reproducers.lstm").DEFAULTS}))
    (submission / "answer.json").write_text(json.dumps({"category": "loss"}))
    graded = grade(submission, key)
    assert graded.kept_task and graded.diagnosed, graded.why_not_kept
    assert graded.accuracy == graded.fixed_accuracy and graded.accuracy[0] > 0.6  # chance: 0.5
    # the two scripts are one run, kept in the cache: grading again trains nothing
    assert len(list(cache.folder().glob("*.pt"))) == 1
    with monkeypatch.context() as patched:
        patched.setattr(sealed_runs.SealedScripts, "_start", None)  # no server starts
        assert grade(submission, key) == graded


def test_the_health_test_is_exact_and_one_sided():
    same = [health.Outcome(0.9, 0.3)] * 5
    assert health.judge(same, same).healthy
    assert health.sign_flip_p([0.0] * 5, health.ACCURACY_MARGIN) == 1 / 32
    one_over = [0.0, 0.0, 0.0, 0.0, health.ACCURACY_MARGIN + 0.01]
    assert health.sign_flip_p(one_over, health.ACCURACY_MARGIN) > health.ALPHA
    worse = [health.Outcome(0.8, 0.3)] * 5
    assert not health.judge(worse, same).healthy
    assert health.outcome("no model", torch.zeros(3, dtype=torch.long), 4) == (
        health.Outcome(0.0, math.inf))
    assert health.outcome(torch.zeros(3, 5), torch.zeros(3, dtype=torch.long),
                          4).loss == math.inf
    # a language model: one row per target token, padding (-100) not counted
    logits = torch.full((2, 3, 5), -10.0)
    logits[0, 0, 1] = logits[0, 1, 2] = logits[1, 0, 4] = 10.0
    targets = torch.tensor([[1, 2, -100], [0, -100, -100]])
    assert health.outcome(logits, targets, 5).accuracy == pytest.approx(2 / 3)


def test_no_task_script_names_its_bug():
    """Every exportable scenario's task script, the part of a task folder that differs by bug
    (the report is one template of figures, checked above)."""
    leaks = {sid: found for sid in supported()
             if (found := named(task_scripts(sid)["buggy"], get_scenario(sid).bug))}
    assert not leaks, leaks


def test_task_scripts_take_a_seed_and_drop_the_patchs_comments():
    scripts = task_scripts("mlp-no_shuffle_sorted")
    assert "torch.manual_seed(SEED)" in scripts["buggy"]
    assert "exported class by class" not in scripts["buggy"]
    assert "argsort(stable=True)\n" in scripts["buggy"]
    for text in scripts.values():
        assert "SYMPTOM" not in text and "bugzoo" not in text and "no_shuffle" not in text
        compile(text, "train.py", "exec")


def test_bad_input_is_a_one_line_error(task, tmp_path, capsys):
    folder, key = task
    assert cli(["task", "make", SCENARIO, "--out", str(folder), "--key", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err
    assert cli(["task", "make", "lstm-rank_skip", "--out", str(tmp_path / "a"), "--key",
                str(tmp_path / "b")]) == 2
    assert "cannot become a task" in capsys.readouterr().err
    submission = tmp_path / "sub"
    submission.mkdir()
    assert cli(["task", "grade", str(folder), "--submission", str(submission), "--key",
                str(key)]) == 2
    assert "answer.json is missing" in capsys.readouterr().err
    (submission / "answer.json").write_text('{"category": "losss"}')
    assert cli(["task", "grade", str(folder), "--submission", str(submission), "--key",
                str(key)]) == 2
    assert "'losss' is not one of" in capsys.readouterr().err
    assert cli(["task", "frobnicate"]) == 2
    assert "unknown task command 'frobnicate'" in capsys.readouterr().err


def test_the_committed_task_results_are_whole_and_quoted_as_they_are():
    """results/tasks.md covers every exportable scenario; the reference solvers score what they
    must (noop 0, oracle all) and the cheats nothing; the teaching guide quotes both files
    through generated figures (each held current by tests/test_quotes.py)."""
    tasks = (ROOT / "results" / "tasks.md").read_text()
    count = re.search(r"\*\*(\d+) of (\d+) exportable scenarios are tasks\.\*\*", tasks)
    assert count and int(count[2]) == len(supported())
    assert all(f"| {s} |" in tasks for s in supported())
    grades = pd.read_csv(ROOT / "results" / "agents.csv")
    solved = grades.groupby("solver")["solved"].agg(["sum", "count"])
    assert solved.loc["noop", "sum"] == 0
    assert solved.loc["oracle", "sum"] == solved.loc["oracle", "count"] == int(count[1])
    assert solved.loc[["key_reader", "template_reader"], "sum"].eq(0).all()
    guide = (ROOT / "docs" / "pages" / "teaching.md").read_text()
    assert "<!--fig:task_set(tasks)-->" in guide and "<!--fig:task_set(exportable)-->" in guide
    for solver in ("noop", "oracle", "oracle_variant", "rules"):
        assert f"<!--fig:solved({solver})-->" in guide, solver
    for model in grades["model"].unique():
        assert f"<!--fig:solved(oracle_variant, {model})-->" in guide, model


def test_oracle_variant_picks_its_change_by_scenario_so_renumbering_keeps_it(task, tmp_path):
    """The same scenario under another task id (a rebuilt set numbers its tasks anew) gets the
    same harmless change, so the solver's figures move only when the grader does."""
    folder, key = task
    renamed = tmp_path / "task-02"
    shutil.copytree(folder, renamed)
    first, second = (oracle_variant(f, key, tmp_path / name)
                     for f, name in ((folder, "first"), (renamed, "second")))
    assert (first / "variant.txt").read_text() == (second / "variant.txt").read_text()
    assert (first / "train.py").read_text() == (second / "train.py").read_text()
    assert (first / "train.py").read_text() != (key / "fixed.py").read_text()



def mlp_key(folder: Path, scenario: str, category: str) -> Path:
    """A task key for an mlp scenario: its fixed script and answer, under ``folder/key``."""
    key = folder / "key"
    key.mkdir()
    (key / "fixed.py").write_text(render(scenario)["fixed"])
    (key / "key.json").write_text(json.dumps({"model": "mlp", "scenario": scenario,
                                              "settings": {}, "category": category,
                                              "bug": scenario.removeprefix("mlp-")}))
    return key

def test_oracle_variant_takes_a_change_the_fixed_script_still_holds(tmp_path, monkeypatch):
    """A fix with a feature of its own (gradient accumulation) rewrites the line the clipping
    change edits: the solver picks among the changes that fit instead of failing."""
    import zlib

    from bugzoo.teach.tasks import solvers

    scenario = "mlp-scheduler_per_microbatch"
    real = solvers.harmless_changes("mlp")
    # two changes, ordered so that picking among all of them by the scenario takes clip1
    other = "wide" if zlib.crc32(scenario.encode()) % 2 == 0 else "batch16"
    monkeypatch.setattr(solvers, "harmless_changes",
                        lambda model: {name: real[name] for name in ("clip1", other)})
    key = mlp_key(tmp_path, scenario, "optim")
    assert "        loss.backward()\n" not in (key / "fixed.py").read_text()
    for name in ("a", "b"):  # the same change each time
        variant = oracle_variant(tmp_path / "task", key, tmp_path / name)
        assert (variant / "variant.txt").read_text() == f"{other}\n"
        assert (variant / "train.py").read_text() != (key / "fixed.py").read_text()
    assert (tmp_path / "a" / "train.py").read_text() == (tmp_path / "b" / "train.py").read_text()



def test_oracle_variant_draws_only_changes_the_grader_found_harmless(tmp_path, monkeypatch):
    """Only the changes ``bugzoo task harmless`` passed on the model's clean script are drawn
    (a change that makes the clean script worse would fail the fix for the grader's reason, not
    the solver's); without that table the solver says what to run."""
    from bugzoo.errors import UsageError
    from bugzoo.teach.tasks import solvers

    scenario = "mlp-double_softmax"
    key = mlp_key(tmp_path, scenario, "architecture")
    verdicts = tmp_path / "harmless.csv"
    names = sorted(solvers.harmless_changes("mlp"))
    pd.DataFrame({"model": "mlp", "change": names,
                  "harmless": [name == "dropout05" for name in names]}).to_csv(verdicts,
                                                                               index=False)
    monkeypatch.setattr(solvers, "HARMLESS_VERDICTS", verdicts)
    variant = oracle_variant(tmp_path / "task", key, tmp_path / "submission")
    assert (variant / "variant.txt").read_text() == "dropout05\n"
    monkeypatch.setattr(solvers, "HARMLESS_VERDICTS", tmp_path / "none.csv")
    with pytest.raises(UsageError, match="run `bugzoo task harmless`"):
        oracle_variant(tmp_path / "task", key, tmp_path / "again")

def test_a_task_needs_a_worse_network_not_just_another_layer():
    """The set keeps a scenario when the unchanged script's networks are worse on fresh data;
    one whose unchanged script only fails the structural check (a legacy spectral norm where
    the fix has a parametrised one) trains as good a network and is no task."""
    from bugzoo.teach.tasks.grade import Grade
    from bugzoo.teach.tasks.taskset import is_task

    def unchanged(kept: bool, p: float) -> Grade:
        return Grade(False, kept, False, False, "none", "" if kept else "layers differ",
                     [0.9] * 5, [0.9] * 5, [0.2] * 5, [0.2] * 5, p, p, "namespaces")

    assert is_task(unchanged(kept=True, p=1.0)) and is_task(unchanged(kept=False, p=1.0))
    assert not is_task(unchanged(kept=False, p=1 / 32))
    assert not is_task(unchanged(kept=True, p=1 / 32))


def test_an_interview_picks_tasks_by_the_task_sets_rule(tmp_path, monkeypatch):
    """An interview keeps a scenario only when the set would: a script that fails the
    grader's structural check unchanged but trains as good a network is passed over."""
    from bugzoo.teach.tasks import interview as interview_module
    from bugzoo.teach.tasks.grade import Grade

    def checked(scenario, task, key, seed):
        for folder in (task, key):
            folder.mkdir(parents=True)
        p = 1 / 32 if len(made) == 0 else 1.0  # the first: another layer, as good a network
        made.append(scenario)
        return Grade(False, False, False, False, "none", "layers differ",
                     [0.9] * 5, [0.9] * 5, [0.2] * 5, [0.2] * 5, p, p, "namespaces")

    made: list[str] = []
    monkeypatch.setattr(interview_module, "make_checked_task", checked)
    kept = interview_module.pick(2, 3, tmp_path)
    assert [scenario for scenario, _, _ in kept] == made[1:3] and len(made) == 3


def test_an_interview_key_climbs_from_symptom_to_answer(task):
    folder, key = task
    ladder = hints(folder, key)
    assert [rung.split(":")[0] for rung in ladder] == ["Symptom", "Curve", "Code region",
                                                       "Answer"]
    assert "double_softmax" not in " ".join(ladder[:3]) and "double_softmax" in ladder[3]
    assert "(in `forward`)" in ladder[2]  # the model's forward


@pytest.mark.parametrize(("rows", "level"), [
    ([], "hard"),
    ([("nonfinite", 6, 6, 3.0)], "medium"),
    ([("nonfinite", 6, 6, 3.0), ("loss_plateau", 5, 6, 40.0), ("initial_loss", 6, 6, 0.0)],
     "easy"),
    ([("nonfinite", 6, 6, 300.0), ("loss_plateau", 5, 6, 400.0), ("initial_loss", 6, 6, 80.0)],
     "medium"),
    ([("nonfinite", 2, 6, 3.0), ("always_alarm", 6, 6, 0.0)], "hard"),  # a baseline never counts
])
def test_difficulty_counts_the_heuristics_that_catch_a_bug_and_how_soon(rows, level):
    board = pd.DataFrame([("some_bug", *row) for row in rows],
                         columns=["bug", "detector", "hits", "runs", "median_delay_steps"])
    assert difficulty("some_bug", board).level == level


def test_the_rules_solver_diagnoses_the_earliest_alarm_and_applies_known_fixes():
    alarms = [{"step": 9, "category": "optim"}, {"step": 3, "category": "unknown"},
              {"step": 3, "category": "loss"}, {"step": 3, "category": "loss"},
              {"step": 3, "category": "data"}]
    assert diagnose(alarms) == "loss" and diagnose([]) == "none"
    assert diagnose([{"step": 0, "category": "unknown"}]) == "none"
    softmax = task_scripts("mlp-double_softmax")
    assert repair(softmax["buggy"], "loss") == (softmax["fixed"], [
        "logits, not probabilities, out of the model"])
    assert repair(softmax["buggy"], "data") == (softmax["buggy"], [])
    no_clearing = task_scripts("mlp-missing_zero_grad")["buggy"]
    repaired, applied = repair(no_clearing, "loop")
    assert applied and "optimizer.zero_grad()\n        loss.backward()" in repaired
    assert repair(repaired, "loop") == (repaired, [])  # a script that clears is left alone


def test_an_exported_pair_is_proven_by_the_catalogues_test(tmp_path):
    # the shortest exported run (62 steps): the classes arrive one after another
    assert cli(["task", "validate", "--scenarios", "mlp-no_shuffle_sorted", "--work",
                str(tmp_path / "work"), "--out", str(tmp_path)]) == 0
    row = pd.read_csv(tmp_path / "validity_exported.csv").iloc[0]
    assert row["metric"] == "final_val_acc" and bool(row["valid"])
    assert row["p_value"] == pytest.approx(1 / 252)  # every buggy seed below every fixed one


def test_a_pair_whose_effect_interval_excludes_zero_is_tested_again_over_ten_seeds(
        tmp_path, monkeypatch):
    """The catalogue's rule holds for exports: not valid over 5 seeds although the effect
    interval excludes 0 (p = 4/252 here), so the pair trains 10 seeds; a valid pair keeps 5."""
    weak, strong = "mlp-double_softmax", "mlp-missing_zero_grad"
    scripts = {s: task_scripts(s) for s in (weak, strong)}
    assert scripts[weak]["fixed"] == scripts[strong]["fixed"]  # neutral: one per model
    values = {scripts[weak]["buggy"]: [2.5, 4.5, 5.0, 5.5, 6.0],
              scripts[strong]["buggy"]: [9.0, 9.5, 10.0, 10.5, 11.0],
              scripts[weak]["fixed"]: [0.0, 1.0, 2.0, 3.0, 4.0]}
    asked = []

    def trained_runs(script, seeds, log):
        asked.append((script.read_text(), list(seeds)))
        return [Trained(seed, observed={"final_val_loss": values[script.read_text()][seed % 5]})
                for seed in seeds]

    monkeypatch.setattr(exported, "trained_runs", trained_runs)
    table = exported.validate_exports([weak, strong], tmp_path).set_index("scenario")
    assert table.loc[weak, "seeds"] == 10 and table.loc[strong, "seeds"] == 5
    assert table.loc[weak, "buggy"] == [2.5, 4.5, 5.0, 5.5, 6.0] * 2
    assert table.loc[weak, "p_value"] < 0.001
    assert table.loc[strong, "p_value"] == pytest.approx(1 / 252)  # every buggy above every fixed
    again = sorted(text for text, seeds in asked if seeds == list(range(10)))
    assert again == sorted([scripts[weak]["buggy"], scripts[weak]["fixed"]])


def test_the_committed_export_validity_covers_every_pair_and_is_quoted():
    table = pd.read_csv(ROOT / "results" / "validity_exported.csv")
    assert sorted(table["scenario"]) == supported()
    guide = " ".join((ROOT / "docs" / "pages" / "teaching.md").read_text().split())
    assert ("<!--fig:exported_pairs(valid)-->" in guide and
            "<!--fig:exported_pairs(rows)-->" in guide)
    invalid = table[~table["valid"]]
    assert (f"Of the {len(invalid)} that are not, {(invalid['catalogue'] == 'unproven').sum()} "
            "belong to scenarios the catalogue leaves unproven too" in guide)
    proven_all_valid = bool((invalid["catalogue"] == "unproven").all())
    assert ("every pair of a scenario the catalogue proves is valid" in guide) == proven_all_valid
    for scenario, catalogue in zip(table["scenario"], table["catalogue"], strict=True):
        assert (catalogue == "unproven") == bool(get_scenario(scenario).unproven), scenario


def test_a_harmless_change_is_judged_by_the_graders_own_retraining(tmp_path):
    """``task harmless`` trains a change and the clean script by the grader's machinery on the
    same fresh data per seed and asks the grader's test; with 2 seeds that test cannot pass
    (its smallest p is 1/4), so the row must say not harmless, whatever the change."""
    from bugzoo.teach.tasks.harmless import prove

    (row,) = prove("mlp", tmp_path, seeds=[0, 1], changes=["batch128"])
    assert (row["model"], row["change"], row["harmless"]) == ("mlp", "batch128", False)
    assert row["accuracy_p"] >= 0.25 and row["loss_p"] >= 0.25
    assert 0.9 < row["clean_accuracy"] <= 1 and 0.9 < row["accuracy"] <= 1  # both trained


def test_the_harmless_table_covers_every_change_the_solver_draws_and_the_page_quotes_it():
    from bugzoo.teach.export import template_models
    from bugzoo.teach.tasks.solvers import harmless_changes

    table = pd.read_csv(ROOT / "results" / "harmless.csv")
    assert {(m, c) for m, c in table[["model", "change"]].values} == {
        (m, c) for m in template_models() for c in harmless_changes(m)}, (
        "results/harmless.csv is stale: regenerate with `bugzoo task harmless`")
    for row in table.itertuples():
        assert row.harmless == health.within_margins(row.accuracy_p, row.loss_p), row
    # the grader's CPU budget must let every harmless change through, with room for noise
    assert table["cpu_ratio"].max() < 0.9 * grade_module.CPU_FACTOR
    rejected = table[~table["harmless"]]
    page = " ".join((ROOT / "docs" / "pages" / "teaching.md").read_text().split())
    quoted = re.search(r"On each model's clean script the grader's own test rejects ([^.]+)\.",
                       page)
    assert quoted, "teaching.md lost its sentence on results/harmless.md"
    assert quoted[1] == (", ".join(f"{m} `{c}`" for m, c in rejected[["model", "change"]].values)
                         or "none"), quoted[1]


def test_task_harmless_names_an_unknown_model_in_one_line(capsys):
    assert cli(["task", "harmless", "--model", "mlpp"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mlpp" in err and "choose from" in err


def test_the_candidate_readme_says_how_long_one_run_of_each_task_took(tmp_path, monkeypatch):
    """Not "seconds on a laptop": each task's one run as ``results/watch.csv`` timed it."""
    import pandas as pd

    from bugzoo.teach.tasks import interview as interview_module
    from bugzoo.teach.tasks.make import make_task

    scenario = "mlp-double_softmax"  # the fastest task; its run shows as the 1 s floor
    watched = pd.read_csv(ROOT / "results" / "watch.csv")
    seconds = watched[(watched["scenario"] == scenario) & (watched["kind"] == "exported")
                      & (watched["variant"] == "buggy")]["seconds"].iloc[0]

    def pick(n, seed, root):
        task, key = root / "candidate" / "task-1", root / "interviewer" / "task-1"
        make_task(scenario, task, key, eval_seed=1)
        return [(scenario, task, key)]

    monkeypatch.setattr(interview_module, "pick", pick)
    monkeypatch.chdir(ROOT)  # results/ as the command reads it
    interview_module.interview(1, 0, tmp_path / "iv", 20)
    readme = (tmp_path / "iv" / "candidate" / "README.md").read_text()
    assert "| `task-1/` | " in readme and f"| {max(1.0, seconds):.0f} s |" in readme
    assert "laptop" not in readme
