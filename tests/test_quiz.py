"""bugzoo quiz: scripted through stdin, reproducible with --seed, never naming the bug early."""

from __future__ import annotations

import io
import logging
import random
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import answers_shown, named

from bugzoo.bugs import get_bug, list_bugs
from bugzoo.cli import main
from bugzoo.teach import quiz as quiz_module
from bugzoo.teach.quiz import QuestionRuns, candidate_scenarios, distractors, sparkline

ROOT = Path(__file__).resolve().parents[1]


def quiz_args(tmp_path) -> list[str]:
    return ["quiz", "--model", "mlp", "-n", "2", "--seed", "4", "--runs", str(tmp_path / "none"),
            "--cache", str(tmp_path / "cache"), "--steps", "30", "--png", str(tmp_path / "png")]


@pytest.mark.slow
def test_quiz_from_stdin_is_reproducible_and_scored(tmp_path, monkeypatch, capsys):
    # the first quiz as a user starts it: everything it and its runs print is read
    done = subprocess.run([sys.executable, "-m", "bugzoo.cli", *quiz_args(tmp_path)],
                          input="Z\n",  # a wrong letter, then end of input (no answer)
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    first, logged = done.stdout, done.stderr
    assert "Score: 0/2" in first
    right = re.findall(r"the answer is ([A-D])", first)
    assert len(right) == 2
    questions = first.split("=== Question")[1:]
    for text in questions:
        asked, revealed = text.split("Your answer", 1)
        bug_id = revealed.split("\n\n", 1)[1].split(" — ")[0].strip()
        symptom = asked.split("Which bug is it?")[0]
        png = Path(re.search(r"curves: (\S+\.png)", asked)[1]).read_bytes()
        assert not (found := named(symptom + logged, bug_id)
                    + answers_shown(symptom + logged, [png])), found
        assert "buggy" in asked and "clean" in asked and "▁" in asked + "█"
        assert png[:4] == b"\x89PNG"
        assert "BUGGY" in revealed and "FIXED" in revealed
    # same seed, its runs now cached: the same questions, now answered right
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(right) + "\n"))
    assert main(quiz_args(tmp_path)) == 0
    again = capsys.readouterr().out
    assert again.count("Correct!") == 2 and "Score: 2/2" in again


def test_no_question_names_its_bug(tmp_path, monkeypatch, capsys):
    """Every question the published traces can show (seed 0's buggy run and its matched
    control), up to its choices, names nothing of its bug, and no id or title of any bug of the
    catalogue; nor is its figure a committed ``results/curves/*.png``. Its choices are four
    titles of the catalogue, one of them its bug's, and no id."""
    runs = pd.read_parquet(ROOT / "results/traces/runs.parquet")
    traces = pd.read_parquet(ROOT / "results/traces/trace.parquet")
    first = runs[runs.seed == 0]
    published = [s for s in candidate_scenarios(None, None) if s.id in set(first.scenario)]
    assert len(published) >= 20
    asked_about, shown = [], []

    def published_runs(scenario, *_) -> QuestionRuns:
        asked_about.append(scenario.bug)
        pair = [first.index[(first.scenario == scenario.id) & (first.role == role)][0]
                for role in ("buggy", "control")]
        (buggy, clean), (buggy_summary, clean_summary) = zip(
            *((traces[traces.run == i], first.loc[i].dropna().to_dict()) for i in pair),
            strict=True)
        shown.append(QuestionRuns(buggy, clean, buggy_summary, clean_summary))
        return shown[-1]

    monkeypatch.setattr(quiz_module, "question_runs", published_runs)
    monkeypatch.setattr(quiz_module, "candidate_scenarios", lambda *_: published)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    quiz_module.quiz(len(published), 0, None, None, ROOT, ROOT, 10, None)
    questions = capsys.readouterr().out.split("=== Question")[1:]
    assert len(asked_about) == len(published)  # each drawn, and each asked where it shows
    showing = [bug for bug, runs in zip(asked_about, shown, strict=True)
               if quiz_module.shows_symptom(get_bug(bug), runs)]
    assert len(questions) == len(showing) >= 20
    titles = {b.title for b in list_bugs()}
    leaks = {}
    for bug, text in zip(showing, questions, strict=True):
        asked = text.split("Your answer")[0]
        choices = re.findall(r"^  [A-D]\) (.*)$", asked, re.M)
        assert len(choices) == 4 and set(choices) <= titles and get_bug(bug).title in choices
        symptom = re.sub(r"^  [A-D]\) .*\n", "", asked, flags=re.M)
        if found := named(symptom, bug) + answers_shown(symptom):
            leaks[bug] = found
    # the figures, drawn as the quiz draws them, for a seeded sample (drawing all is minutes)
    for n, runs in enumerate(random.Random(0).sample(shown, 12)):
        figure = quiz_module.draw(runs, tmp_path / f"question{n}.png").read_bytes()
        if found := answers_shown("", [figure]):
            leaks[f"figure {n}"] = found
    assert not leaks, leaks


def test_filters_and_distractors():
    loss = candidate_scenarios("loss", None)
    assert loss and all(get_bug(s.bug).category == "loss" for s in loss)
    assert all(s.model == "lstm" for s in candidate_scenarios(None, "lstm"))
    bug = get_bug("double_softmax")
    others = distractors(bug, "mlp", random.Random(0))
    assert len(others) == 3 and bug not in others and len({b.id for b in others}) == 3
    assert any(b.category == "loss" for b in others)
    assert distractors(bug, "mlp", random.Random(0)) == others


def test_sparkline():
    assert sparkline([0.0, 0.5, 1.0, float("nan")], 0.0, 1.0) == "▁▅█×"
    assert len(sparkline(list(range(500)), 0, 499, width=40)) == 40


def test_a_question_can_show_its_symptom():
    """No question whose symptom one buggy run beside one clean run cannot show (two runs of
    one seed that disagree), none needing CUDA, and no line about the ones left out."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger("bugzoo").addHandler(handler)
    try:
        chosen = candidate_scenarios(None, None)
    finally:
        logging.getLogger("bugzoo").removeHandler(handler)
    bugs = {get_bug(s.bug) for s in chosen}
    assert bugs and all(b.check.direction != "varies" and not b.needs_cuda for b in bugs)
    assert "nondeterministic_seed" not in {b.id for b in bugs} and stream.getvalue() == ""


def test_a_mistyped_answer_is_asked_again(monkeypatch, capsys):
    from bugzoo.teach.quiz import ask

    monkeypatch.setattr("sys.stdin", io.StringIO("Z\n\nab\nc\n"))
    assert ask("Your answer (A-D): ") == "C"
    assert capsys.readouterr().out.count("please answer with one letter: A, B, C, D") == 3
    monkeypatch.setattr("sys.stdin", io.StringIO("E\n"))
    assert ask("Your answer (A-D): ") == ""  # then the end of input: no answer


def test_a_question_is_asked_only_where_its_own_runs_show_its_symptom():
    """A symptom row that points the other way from the check (a gap lower than clean for a
    check that says "higher"), or an event the buggy run did not have, is no question."""
    from bugzoo.teach.quiz import shows_symptom

    def runs(buggy: dict, clean: dict) -> QuestionRuns:
        return QuestionRuns(pd.DataFrame(), pd.DataFrame(), buggy, clean)

    higher, event = get_bug("double_softmax"), get_bug("lr_too_high")
    metric = higher.check.metric
    assert higher.check.direction == "higher" and event.check.direction == "event"
    assert shows_symptom(higher, runs({metric: 2.0}, {metric: 1.0}))
    assert not shows_symptom(higher, runs({metric: 0.5}, {metric: 1.0}))
    assert shows_symptom(higher, runs({metric: float("nan")}, {metric: 1.0}))
    assert not shows_symptom(higher, runs({}, {metric: 1.0}))
    assert shows_symptom(event, runs({"nonfinite": True}, {"nonfinite": False}))
    assert not shows_symptom(event, runs({"nonfinite": False}, {"nonfinite": False}))


def test_questions_come_from_proven_scenarios_only():
    """Questions come only from scenarios results/validity.csv proves. A scenario file's
    unproven mark counts without the table (which may be older than the mark), and the table's
    verdict without a mark."""
    from bugzoo.scenarios import list_scenarios
    from bugzoo.teach.quiz import proven_scenarios

    proven = proven_scenarios(ROOT / "results" / "validity.csv")
    table = pd.read_csv(ROOT / "results" / "validity.csv")
    unproven = set(table.loc[table["unproven"].notna() | ~table["valid"], "scenario"])
    assert unproven and proven and not unproven & proven
    chosen = {s.id for s in candidate_scenarios(None, None, proven)}
    assert chosen and chosen <= proven
    marked = {s.id for s in list_scenarios() if s.unproven}
    assert marked and not marked & {s.id for s in candidate_scenarios(None, None)}
    one = sorted(chosen)[0]
    assert one not in {s.id for s in candidate_scenarios(None, None, proven - {one})}
