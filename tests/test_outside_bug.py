"""The worked example of README's "Adding a bug or a scenario": tests/examples/outside_bug, a
package of its own with one bug plug-in and one scenario folder, installed into a temporary
folder (nothing of this repository edited) and run through check-bug, list, show, run (a Hydra
glob sweep), bench, validate, curves and export (#20)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.paths import SCENARIO_PATH_ENV

EXAMPLE = Path(__file__).resolve().parent / "examples" / "outside_bug"
SCENARIOS = EXAMPLE / "scenarios"
BUG = "mylab/label_smoothing_extreme"
SCENARIO = "mlp-mylab--label_smoothing_extreme"
QUICK = ("harness.steps=60", "harness.eval_interval=20")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The example installed with pip into a fresh folder (built from a copy, so the checkout
    gets no build leftovers)."""
    root = tmp_path_factory.mktemp("outside")
    source = shutil.copytree(EXAMPLE, root / "src", ignore=shutil.ignore_patterns("scenarios"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--target", str(root / "site"), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (root / "site" / "mylab_bugs-0.1.0.dist-info" / "entry_points.txt").is_file()
    return root / "site"


def test_check_bug_passes_on_the_installed_example(site):
    """The real console script, in a fresh process that finds the bug by its entry point."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([shutil.which("bugzoo"), "check", "bug", BUG, "--model", "mlp",
                           "--include", str(SCENARIOS)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    for check in ("check_card", "check_plant [mlp]", "check_deterministic [mlp]",
                  "check_blind [mlp]", "check_validate [mlp]"):
        assert f"ok   {check}: " in done.stdout
    assert "final_val_loss higher: effect +" in done.stdout
    assert done.stdout.strip().endswith(f"{BUG} passes all 5 checks")


def cli(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(list(argv))
    assert code == 0, err.getvalue()[-2000:]
    return out.getvalue()


@pytest.fixture
def installed(site, monkeypatch) -> Path:
    """The example on this process's path (and so on its spawned workers'); the scenario path
    the verbs' --include sets is restored afterwards."""
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(SCENARIO_PATH_ENV, "")
    return site


@pytest.mark.slow
def test_list_run_bench_validate_and_curves_on_the_example(installed, tmp_path):
    include = ("--include", str(SCENARIOS))
    row = next(line for line in cli("list", "bugs").splitlines() if BUG in line)
    assert row.split()[-1] == "mylab-bugs"
    assert cli("show", BUG).startswith(f"{BUG} — Label smoothing of 0.9")
    listed = cli("list", "scenarios", *include)
    row = next(line for line in listed.splitlines() if line.split()[0] == SCENARIO)
    assert row.split()[1:4] == ["mlp", BUG, "mlp-clean"]  # its control is bugzoo's own
    # registered like the built-in scenarios: a Hydra glob sweep picks them up (Hydra #1942)
    cli("run", *include, "-m", "scenario=glob(*-mylab--*)", "harness.steps=3",
        "harness.eval_interval=3", f"harness.out_dir={tmp_path / 'runs'}", "harness.sweep=glob")
    assert sorted(p.name for p in (tmp_path / "runs" / "glob").iterdir()) == [
        "lstm-mylab--label_smoothing_extreme", SCENARIO]
    summary = json.loads((tmp_path / "runs" / "glob" / SCENARIO / "seed0" / "summary.json")
                         .read_text())
    assert summary["bug"] == BUG and summary["category"] == "loss"
    cli("bench", "--quick", *include, "--scenarios", "mlp-mylab--*", "--detectors", "nonfinite",
        "--no-overhead", "--no-progress", "--workers", "1", "--out", str(tmp_path / "bench"))
    board = pd.read_csv(tmp_path / "bench" / "leaderboard.csv").set_index("detector")
    assert board.loc["nonfinite", "pairs"] == 1  # the buggy run against its disarmed twin
    stored = {p.parent.relative_to(tmp_path / "bench").as_posix()
              for p in (tmp_path / "bench").glob("*/seed0*/summary.json")}
    # the run and its twin, and the decoy pair that impersonates the only bug of the sweep
    assert stored == {f"{SCENARIO}/seed0{tag}" for tag in ("", ".control", ".honeypot",
                                                            ".honeypot.control")}

    runs, seeds = str(tmp_path / "validity"), ("--seeds", "0,1")
    cli("results", "validate", *include, "--scenarios", SCENARIO, *seeds, "--runs", runs, "--out",
        str(tmp_path / "results"), "--workers", "1", "--no-progress", *QUICK)
    row = pd.read_csv(tmp_path / "results" / "validity.csv").set_index("scenario").loc[SCENARIO]
    assert (row.bug, row.metric, row.direction, row.control) == (
        BUG, "final_val_loss", "higher", "mlp-clean")
    assert row.effect_lo > 0.3  # far above the control, in the declared direction

    cli("curves", BUG, "model=mlp", *include, *seeds, "--runs", runs, "--out",
        str(tmp_path / "curves"), "--no-progress", *QUICK)
    assert (tmp_path / "curves" / "mylab--label_smoothing_extreme.png").stat().st_size > 10_000

    assert SCENARIO in cli("export", "--list", *include).split()
    cli("export", SCENARIO, "--out", str(tmp_path / "export"), *include)
    buggy, fixed = ((tmp_path / "export" / f"{v}.py").read_text() for v in ("buggy", "fixed"))
    assert "label_smoothing=0.9" in buggy and "label_smoothing=" not in fixed


def test_a_curves_figure_quotes_what_it_draws_not_where_its_files_went():
    from bugzoo.commands import command_line
    from bugzoo.judge.curves import WHERE_FILES_GO

    argv = ["mylab/x", "--model", "mlp", "--runs", "/home/me/runs", "--out=/home/me/png",
            "--seeds", "0-2"]
    assert command_line("curves", argv, leave_out=WHERE_FILES_GO) == (
        "bugzoo curves mylab/x --model mlp --seeds 0-2")
