"""What a tool builder outside the repository meets: plug-ins stay out of bugzoo's suites and
of a plain bench, every leaderboard names what made it, pipes close quietly, and every unknown
name gets the same one-line answer."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import faults
import pandas as pd
import pytest

from bugzoo import versions
from bugzoo.cli import SIGPIPE_STATUS, main
from bugzoo.detector_registry import DETECTORS, select_detectors, shipped_detectors

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The fault plug-ins (``always_on`` among them) installed for this test only: a
    ``.dist-info`` folder with an entry point, on sys.path and on the workers' PYTHONPATH."""
    site = faults.install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", faults.env_with(site)["PYTHONPATH"])
    assert "always_on" in DETECTORS.names()
    return site


def test_a_plain_bench_leaves_outside_plugins_out(plugin):
    assert "always_on" not in select_detectors()  # not in the default selection
    assert "always_on" not in shipped_detectors()
    assert "always_on" in select_detectors(["plugins"])
    assert select_detectors(["nonfinite,plugins"])[0] == "nonfinite"  # commas separate too


def bench(out: Path, *detectors: str) -> pd.DataFrame:
    """``bugzoo bench`` in this process (its worker is kept for the next one)."""
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["bench", "--scenarios", "mlp-double_softmax", "--seeds", "0", "--workers",
                     "1", "--out", str(out), "--no-progress", "--no-overhead", "--detectors",
                     *detectors, "harness.steps=30", "harness.eval_interval=10"]) == 0
    return pd.read_csv(out / "leaderboard.csv").set_index("detector")


@pytest.mark.slow
def test_the_builtin_suite_is_the_same_with_a_plugin_beside_it(tmp_path, plugin):
    own = ("nonfinite", "ce_probabilities", "random_alarm")
    without = bench(tmp_path / "without", *own)
    beside = bench(tmp_path / "beside", *own, "always_on")
    timing = [c for c in without.columns if "overhead" in c or "delay_s" in c]
    suite = "suite: built-ins"
    pd.testing.assert_series_equal(without.loc[suite].drop(timing), beside.loc[suite].drop(timing))
    row = beside.loc["always_on"]  # the plug-in has a row of its own, naming where it came from
    assert row["source"] == f"{faults.DIST} 0.1" and row["role"] == "heuristic"
    assert row["matched_false_alarm_rate"] == 1.0  # it alarms on every control too
    assert beside.loc["random_alarm", "role"] == "baseline"  # never a suite member
    text = (tmp_path / "beside" / "leaderboard.md").read_text()
    assert f"| always_on | heuristic | generic | {faults.DIST} 0.1 |" in text
    assert versions() in text
    assert versions() in (tmp_path / "beside" / "command.txt").read_text()


def test_version():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--version"]) == 0
    assert out.getvalue().strip() == versions()
    assert re.fullmatch(r"bugzoo [\d.]+, torch \S+", versions())
    from importlib.metadata import version

    assert version("bugzoo-bench") == versions().split()[1].rstrip(",")  # read from one place


@pytest.mark.parametrize("argv", [["list", "bugs"], ["list", "scenarios"],
                                  ["show", "double_softmax"], ["--version"], ["export", "--list"],
                                  ["exercise"]])
def test_a_reader_that_leaves_early_ends_the_verb_quietly(argv):
    """`bugzoo list bugs | true`: the reader is gone before the first write."""
    exe = shutil.which("bugzoo")
    proc = subprocess.Popen([exe, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # long before the verb has imported anything, let alone written
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == SIGPIPE_STATUS
    assert stderr == "", stderr  # no traceback, no "Exception ignored"


UNKNOWN = [
    (["run", "scenario=mlp-dubble_softmax"], "scenario", "mlp-double_softmax"),
    (["run", "model=mpl"], "model", "mlp"),
    (["run", "bug=double_softmx"], "bug", "double_softmax"),
    (["run", "detector=[nonfinit]"], "detector", "nonfinite"),
    (["show", "double_softmx"], "bug", "double_softmax"),
    (["list", "bug"], "list", "bugs"),
    (["bench", "--scenarios", "mlp-dubble_softmax"], "scenario", "mlp-double_softmax"),
    (["bench", "--detectors", "nonfinit"], "detector", "nonfinite"),
    (["results", "validate", "--scenarios", "mlp-dubble_softmax"], "scenario",
     "mlp-double_softmax"),
    (["curves", "double_softmx"], "bug", "double_softmax"),
    (["curves", "double_softmax", "--model", "mpl"], "model", "mlp"),
    (["results", "perf", "overhead", "--model", "mpl"], "model", "mlp"),
    (["results", "perf", "overhead", "--detectors", "nonfinit"], "detector", "nonfinite"),
    (["check", "detector", "nonfinit"], "detector", "nonfinite"),
    (["check", "bug", "double_softmx"], "bug", "double_softmax"),
    (["quiz", "--model", "mpl"], "model", "mlp"),
    (["quiz", "--category", "los"], "category", "loss"),
    (["export", "mlp-dubble_softmax"], "scenario", "mlp-double_softmax"),
    (["exercise", "nan-hnt"], "exercise", "nan-hunt"),
    (["exercise", "overfit-batch", "--scenario", "mlp-dubble_softmax"], "scenario",
     "mlp-double_softmax"),
]


@pytest.mark.parametrize(("argv", "kind", "meant"), UNKNOWN, ids=[" ".join(a) for a, *_ in UNKNOWN])
def test_every_unknown_name_gets_the_same_answer(argv, kind, meant, tmp_path):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main([*argv, *(["--out", str(tmp_path)] if argv[0] == "export" else [])])
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1, err.getvalue()[-600:]
    words = argv[:2] if argv[0] in ("results", "check", "task") else argv[:1]
    assert lines[0].startswith(f"bugzoo {' '.join(words)}: error: unknown {kind} ")
    assert f"did you mean '{meant}'?" in lines[0] and "(valid: " in lines[0]
    assert not os.listdir(tmp_path)  # nothing written


def test_an_unknown_detector_counts_what_the_listing_lists_and_names_the_selectors(capsys):
    """The error's count is the rows ``bugzoo list detectors`` prints (selectors are words of
    ``--detectors``, not detectors), and a near miss of a selector is offered as one."""
    from bugzoo.detector_registry import SELECTORS

    assert main(["list", "detectors"]) == 0
    listed = len(capsys.readouterr().out.strip().splitlines()) - 1  # less the header
    assert main(["bench", "--detectors", "nonfinit"]) == 2
    err = capsys.readouterr().err
    assert f"`bugzoo list detectors` lists all {listed})" in err
    assert f"or a selector: {', '.join(SELECTORS)}" in err
    assert main(["bench", "--detectors", "builtin"]) == 2
    assert "did you mean the selector 'builtins'?" in capsys.readouterr().err
