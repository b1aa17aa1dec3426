"""``--changed`` for the task tables: a row is carried only while its key (the scenario's task
scripts and the code that runs, grades and solves them) is today's; the committed tables are
today's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from bugzoo.cli import main as cli
from bugzoo.scenarios import get_scenario
from bugzoo.teach.export import supported
from bugzoo.teach.tasks import exported, taskset
from bugzoo.teach.tasks.carry import grade_key
from bugzoo.teach.tasks.exported import pair_key
from bugzoo.teach.tasks.grade import Grade
from bugzoo.teach.tasks.make import make_task
from bugzoo.teach.tasks.taskset import set_key

ROOT = Path(__file__).resolve().parents[1]
PAIR = ["mlp-double_softmax", "mlp-lr_too_high"]


def fake_grade(worse: bool) -> Grade:
    accuracy = [0.2] * 5 if worse else [0.9] * 5
    return Grade(diagnosed=not worse, kept_task=True, healthy=not worse, solved=not worse,
                 category="loss", why_not_kept="", accuracy=accuracy, fixed_accuracy=[0.9] * 5,
                 loss=[2.0] * 5, fixed_loss=[0.3] * 5, accuracy_p=0.5 if worse else 0.01,
                 loss_p=0.5 if worse else 0.01, sandbox="namespaces")


@pytest.fixture
def counted(monkeypatch):
    """Every training step of the three commands replaced by a record of what it ran."""
    ran: dict[str, list[str]] = {"validate": [], "set": [], "agents": []}

    def validate(scenarios, work):
        ran["validate"] += scenarios
        return pd.DataFrame([{"scenario": s, "metric": "final_val_loss", "direction": "higher",
                              "seeds": 2, "buggy": [1.0, None], "fixed": [0.5, float("nan")],
                              "effect": 0.5, "effect_lo": 0.5, "effect_hi": 0.5,
                              "p_value": 0.004} for s in scenarios])

    def make_checked(scenario, task, key, seed):
        ran["set"].append(scenario)
        for folder in (task, key):
            folder.mkdir(parents=True)
        (key / "key.json").write_text(json.dumps({"scenario": scenario}))
        return fake_grade(worse=True)

    def solve(task, key, submission):
        ran["agents"].append(json.loads((key / "key.json").read_text())["scenario"])
        submission.mkdir(parents=True)
        return submission

    monkeypatch.setattr(exported, "validate_exports", validate)
    monkeypatch.setattr(taskset, "make_checked_task", make_checked)
    monkeypatch.setattr(taskset, "SOLVERS", {"oracle": solve})
    monkeypatch.setattr(taskset, "grade", lambda submission, key: fake_grade(worse=False))
    return ran


def run_all(tmp_path: Path, name: str, *changed: str) -> None:
    results = ["--results", str(tmp_path)]
    assert cli(["task", "validate", "--scenarios", *PAIR, "--out", str(tmp_path), *changed]) == 0
    assert cli(["task", "set", "--out", str(tmp_path / name), "--scenarios", *PAIR, *results,
                *changed]) == 0
    assert cli(["task", "agents", "--set", str(tmp_path / name), "--solvers", "oracle",
                *results, *changed]) == 0


def test_changed_reruns_only_the_rows_whose_key_moved(tmp_path, counted, capsys):
    run_all(tmp_path, "set1")
    assert all(sorted(ran) == PAIR for ran in counted.values())
    tables = {name: pd.read_csv(tmp_path / name) for name in
              ("validity_exported.csv", "tasks.csv", "agents.csv")}

    for ran in counted.values():
        ran.clear()
    run_all(tmp_path, "set2", "--changed")
    assert counted == {"validate": [], "set": [], "agents": []}
    for name, table in tables.items():
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), table, obj=name)
    assert "2 pairs' runs were carried" in (tmp_path / "validity_exported.md").read_text()
    assert "2 rows were carried" in (tmp_path / "tasks.md").read_text()
    assert "2 of the 2 grades were carried" in (tmp_path / "agents.md").read_text()
    # a carried task's folder is written (unchecked), so that its grades can be made again
    keys = sorted(json.loads(p.read_text())["scenario"]
                  for p in (tmp_path / "set2" / "keys").glob("task-*/key.json"))
    assert keys == sorted(PAIR) and len(list((tmp_path / "set2" / "tasks").iterdir())) == 2

    for name in tables:  # the first scenario's scripts or code "changed"
        table = pd.read_csv(tmp_path / name)
        table.loc[table["scenario"] == PAIR[0], "key"] = "stale"
        table.to_csv(tmp_path / name, index=False)
    for ran in counted.values():
        ran.clear()
    run_all(tmp_path, "set3", "--changed")
    assert counted == {"validate": [PAIR[0]], "set": [PAIR[0]], "agents": [PAIR[0]]}
    for name, table in tables.items():
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), table, obj=name)
    index = pd.read_csv(tmp_path / "set3" / "keys" / "index.csv")
    assert dict(zip(index["scenario"], index["carried"], strict=True)) == {PAIR[0]: False,
                                                                             PAIR[1]: True}


def test_changed_needs_a_table_with_keys(tmp_path, counted, capsys):
    pd.DataFrame({"scenario": PAIR}).to_csv(tmp_path / "validity_exported.csv", index=False)
    assert cli(["task", "validate", "--changed", "--out", str(tmp_path)]) == 2
    assert "has no key column" in capsys.readouterr().err
    assert cli(["task", "set", "--changed", "--out", str(tmp_path / "s"), "--results",
                str(tmp_path)]) == 2
    assert "tasks.csv, which does not exist" in capsys.readouterr().err
    assert counted == {"validate": [], "set": [], "agents": []}


def test_a_graded_task_needs_its_folder(tmp_path, counted, capsys):
    """A set whose task folder is gone: scoring a solver on it anew is a one-line error, not a
    crash."""
    run_all(tmp_path, "set1")
    assert cli(["task", "set", "--out", str(tmp_path / "set2"), "--scenarios", *PAIR,
                "--results", str(tmp_path), "--changed"]) == 0
    shutil.rmtree(tmp_path / "set2" / "tasks" / "task-01")
    assert cli(["task", "agents", "--set", str(tmp_path / "set2"), "--solvers", "oracle",
                "--results", str(tmp_path)]) == 2
    assert "has no folder for task-01" in capsys.readouterr().err


def test_a_carried_task_is_made_as_a_checked_one(tmp_path, monkeypatch):
    """The folder ``task set --changed`` writes for a carried task is the one a checked build
    writes: the same evaluation seed, drawn from the set's seed and the scenario."""
    drawn = []

    def recording(scenario, task, key, eval_seed):
        drawn.append((scenario, eval_seed))
        return make_task(scenario, task, key, eval_seed=eval_seed)

    monkeypatch.setattr(taskset, "make_task", recording)
    monkeypatch.setattr(taskset, "grade", lambda submission, key: None)
    taskset.make_checked_task(PAIR[0], tmp_path / "t", tmp_path / "k", 3)
    carried = pd.DataFrame([{"scenario": PAIR[0], "in_set": True, "key": "k",
                             **dict.fromkeys(taskset.SET_COLUMNS[1:], 0.0)}])
    taskset.build_set(tmp_path / "set", [PAIR[0]], 3, carried)
    assert len(drawn) == 2 and drawn[0] == drawn[1]


def test_the_committed_task_tables_are_todays():
    """Every row of the committed task tables has today's key: the scripts and code that made
    it are this checkout's, so no table is older than an export delta or the grader."""
    pairs = pd.read_csv(ROOT / "results" / "validity_exported.csv")
    assert sorted(pairs["scenario"]) == supported()
    assert (pairs["key"] == pairs["scenario"].map(pair_key)).all()
    tasks = pd.read_csv(ROOT / "results" / "tasks.csv")
    assert sorted(tasks["scenario"]) == supported()
    assert (tasks["key"] == [set_key(s, 0) for s in tasks["scenario"]]).all()
    grades = pd.read_csv(ROOT / "results" / "agents.csv")
    assert set(grades["scenario"]) == set(tasks.loc[tasks["in_set"], "scenario"])
    assert (grades["key"] == [grade_key(set_key(s, 0), get_scenario(s).model, solver)
                              for s, solver in zip(grades["scenario"], grades["solver"],
                                                   strict=True)]).all()
