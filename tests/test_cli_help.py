"""The CLI helps: every verb's help is plain text and names --include, bad input gets one line
that names the problem and the nearest choices, and what a run found is printed."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import re

import pytest

from bugzoo.cli import COMMANDS, main, spelled_today
from bugzoo.commands import command_line


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse's --help
            code = e.code
    return code, out.getvalue(), err.getvalue()


def leaves(table: dict = COMMANDS, words: tuple = ()) -> list[tuple[str, ...]]:
    """Every command of the table, by its words (``("check", "bug")``)."""
    return [found for word, command in table.items()
            for found in (leaves(command.words, (*words, word)) if command.words
                          else [(*words, word)])]


@pytest.mark.parametrize("words", [w for w in leaves() if w != ("run",)], ids=" ".join)
def test_every_command_help_is_plain_text_and_names_include(words):
    code, out, _ = run(*words, "--help")
    assert code == 0 and out.strip(), words
    command = COMMANDS[words[0]]
    for word in words[1:]:
        command = command.words[word]
    takes_options = "argv" in str(inspect.signature(resolve(command.target)))
    assert ("--include DIR" in out) == takes_options, words  # a writer with no options has none
    assert "``" not in out and ":func:" not in out and ":class:" not in out


def resolve(target: str):
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


def test_help_lists_every_command_once_in_its_group():
    code, out, _ = run("--help")
    assert code == 0
    listed = re.findall(r"^  (\S+)", out, re.M)
    assert sorted(listed) == sorted(COMMANDS) and len(listed) == len(set(listed))
    assert out.index("Benchmark a debugging tool:") < out.index("Maintaining the benchmark:")
    for word, command in COMMANDS.items():  # a command with words lists them on its line
        if command.words:
            assert f"  {word} {'|'.join(command.words)}" in out
    code, out, _ = run("results", "--help")
    assert code == 0 and all(f"  {word}" in out for word in COMMANDS["results"].words)


@pytest.mark.parametrize(("old", "new"), [
    (["validate", "--help"], "`bugzoo validate` is now `bugzoo results validate`"),
    (["check-bug", "--help"], "`bugzoo check-bug` is now `bugzoo check bug`"),
    (["check", "nonfinite", "--help"], "`bugzoo check NAME` is now `bugzoo check detector NAME`"),
    (["perf", "--help"], "`bugzoo perf` is now `bugzoo results perf`"),
    (["coverage", "--help"], "`bugzoo coverage` is now `bugzoo results coverage`"),
])
def test_an_old_spelling_works_for_one_release_with_a_notice(old, new):
    code, out, err = run(*old)
    assert code == 0 and out.strip()
    assert err.strip().splitlines() == [f"bugzoo: {new}; the old spelling goes in the next "
                                        "release"]


def test_old_model_spellings_are_today_s_model_flag():
    assert spelled_today(["check-bug", "b", "--models", "mlp", "lstm"]) == [
        "check", "bug", "b", "--model", "mlp", "lstm"]
    assert spelled_today(["curves", "b", "model=mlp", "model=gpt", "seed=1"]) == [
        "curves", "b", "--model", "mlp", "--model", "gpt", "seed=1"]
    assert spelled_today(["results", "perf", "overhead", "--model", "mlp"]) == [
        "results", "perf", "overhead", "--model", "mlp"]
    assert spelled_today(["run", "model=mlp"]) == ["run", "model=mlp"]  # Hydra's own override


def test_an_unknown_word_at_any_level_gets_a_did_you_mean():
    code, _, err = run("results", "validat")
    assert code == 2 and err.strip() == ("bugzoo results: error: unknown results command "
                                         f"'validat'; did you mean 'validate'? (valid: "
                                         f"{', '.join(sorted(COMMANDS['results'].words))})")
    code, _, err = run("benh")
    assert code == 2 and "did you mean 'bench'?" in err


def test_validate_exported_runs_the_task_validate_action(monkeypatch):
    """``bugzoo validate --exported`` (1.x) proves the exported script pairs: it is ``bugzoo
    task validate`` with the other options, and a mistake in them is that action's one-line
    error."""
    from bugzoo.teach.tasks import exported

    seen = []
    monkeypatch.setattr(exported, "main", lambda argv: seen.append(argv) or 0)
    code, _, err = run("validate", "--changed", "--exported")
    assert code == 0 and seen == [["--changed"]]
    assert "`bugzoo validate --exported` is now `bugzoo task validate`" in err
    monkeypatch.undo()
    code, _, err = run("validate", "--exported", "--scenarios", "mlp-no_such_bug")
    assert code == 2 and "mlp-no_such_bug" in err.strip().splitlines()[-1]


def test_run_help_starts_with_usage_and_examples():
    code, out, _ = run("run", "--help")
    assert out.startswith("usage: bugzoo run") and "examples:" in out
    assert "bugzoo run scenario=mlp-double_softmax" in out


@pytest.mark.parametrize(("params", "expected"), [
    (["windw=3"], "unknown parameter of detector loss_plateau 'windw'; did you mean 'window'?"),
    (["window=abc"], "detector loss_plateau: window must be int, got 'abc'"),
])
def test_detector_parameters_are_checked_against_the_constructor(params, expected):
    code, _, err = run("check", "detector", "loss_plateau", *params)
    assert code == 2 and err.startswith(f"bugzoo check detector: error: {expected}")
    assert len(err.strip().splitlines()) == 1


def test_a_detector_parameter_given_as_text_is_converted():
    from bugzoo.detector_registry import load_detector

    assert load_detector("loss_plateau", window="20", min_rel_improvement=1).window == 20


@pytest.mark.parametrize(("yaml", "expected"), [
    ("scenario: mlp-odd\ndefaults:\n  - override /bug: nope_bug\n", "unknown bug 'nope_bug'"),
    ("scenario: mlp-odd\ndefaults:\n  - override /bug: double_softmax\noptim: {lr: 0.123}\n",
     "buggy scenario mlp-odd has no matched control"),
])
def test_a_bad_scenario_file_names_itself(tmp_path, yaml, expected, monkeypatch):
    monkeypatch.setenv("BUGZOO_SCENARIO_PATH", "")  # --include extends it: put it back after
    (tmp_path / "mlp-odd.yaml").write_text(yaml)
    code, _, err = run("list", "scenarios", "--include", str(tmp_path))
    assert code == 2 and f"{tmp_path / 'mlp-odd.yaml'}" in err and expected in err


def test_an_unknown_scenario_gets_three_near_ids_and_a_pointer():
    code, _, err = run("run", "scenario=mlp-dubble_softmax")
    assert code == 2 and len(err) < 300 and "`bugzoo list scenarios` lists all" in err
    assert err.count(", ") <= 3


def test_paths_that_do_not_exist_are_errors(tmp_path):
    code, _, err = run("report", "--results", str(tmp_path / "nope"))
    assert code == 2 and "no results folder" in err
    assert not (tmp_path / "nope").exists()


def test_recorded_commands_quote_globs_and_keep_include():
    argv = ["--scenarios", "mlp-*", "--include", "my scenarios", "--workers", "2"]
    assert command_line("bench", argv) == \
        "bugzoo bench --scenarios 'mlp-*' --include 'my scenarios'"


def test_a_run_prints_each_alarm(tmp_path):
    code, out, _ = run("run", "scenario=mlp-lr_too_high", "harness.steps=30",
                       f"harness.out_dir={tmp_path}", "detector=[nonfinite]")
    assert code == 0 and "nonfinite: 1 alarm," in out
    assert "alarm     step 19  nonfinite: nonfinite (numerics)" in out


def test_list_detectors_says_role_scope_default_and_sealed():
    code, out, _ = run("list", "detectors")
    header = out.splitlines()[0].split()
    assert code == 0 and header[:5] == ["name", "role", "scope", "default", "sealed"]
    loss_plateau = next(line.split() for line in out.splitlines()
                        if line.split()[:1] == ["loss_plateau"])
    assert loss_plateau[1:5] == ["heuristic", "generic", "yes", "yes"]
