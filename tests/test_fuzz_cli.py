"""Bad input, fuzzed: every mistake ends in one line naming it, exit code 2, no traceback,
and nothing already stored is touched. ``bugzoo.cli.main`` runs in-process for speed; a few
checks go through the real console script."""

from __future__ import annotations

import contextlib
import io
import shutil
import string
import subprocess
from pathlib import Path

import faults
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bugzoo import scenarios as scenario_registry
from bugzoo.bugs import ALL_MODELS, list_bugs
from bugzoo.cli import main
from bugzoo.config import compose_run, group_choices
from bugzoo.harness import store
from bugzoo.harness.runner import execute
from bugzoo.paths import CONF_DIR, SCENARIO_DIR

EXAMPLES = 12  # per property (fewer where noted), as README (Reliability) quotes it
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
FEW = settings(FUZZ, max_examples=6)  # properties whose examples compose twice
NAME = st.text(string.ascii_lowercase + string.digits + "_-", min_size=1, max_size=16)
WORD = st.text(string.ascii_letters, min_size=1, max_size=8)  # parses as a string override


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, str]:
    """A results folder holding one real run, and the digest of its every byte."""
    root = tmp_path_factory.mktemp("results")
    result = execute(compose_run(["scenario=mlp-clean", "harness.steps=5",
                                  "harness.eval_interval=5"]))
    store.write_run(store.run_dir(root, "single", "mlp-clean", 0), result.config, result.trace,
                    result.alarms, result.summary)
    return root, faults.folder_digest(root)


def fails(argv: list[str]) -> str:
    """Run the CLI in-process; assert a one-line usage error with exit 2; return that line."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    lines = err.getvalue().strip().splitlines()
    assert code == 2, (argv, code, err.getvalue()[-500:])
    assert len(lines) == 1 and "Traceback" not in err.getvalue(), (argv, err.getvalue()[-500:])
    assert lines[0].startswith(f"bugzoo {argv[0]}: error: "), lines
    return lines[0]


def unharmed(stored: tuple[Path, str]) -> None:
    root, digest = stored
    assert faults.folder_digest(root) == digest, "a stored run was changed"
    assert sorted(p.relative_to(root) for p in root.rglob("*") if p.is_dir()) == [
        Path("single"), Path("single/mlp-clean"), Path("single/mlp-clean/seed0")]


@FUZZ
@given(group=st.sampled_from(["model", "bug", "scenario", "data", "optim"]), value=NAME)
def test_unknown_ids(stored, group, value):
    valid = group_choices(group) if group != "scenario" else sorted(scenario_registry.registry())
    if value in valid:
        return
    line = fails(["run", f"{group}={value}", f"harness.out_dir={stored[0]}"])
    assert f"unknown {group} '{value}'" in line and "(valid: " in line
    assert len(line) < 300  # short: the few nearest choices, and where the rest are
    assert valid[0] in line if len(valid) <= 12 else f"`bugzoo list {group}s` lists all" in line
    line = fails(["show", value]) if group == "bug" else fails(["list", value])
    assert f"'{value}'" in line and "(valid: " in line
    unharmed(stored)


BAD_COUNT = st.one_of(st.integers(max_value=0), st.integers(min_value=1_000_001, max_value=2**62),
                      st.floats(allow_nan=False, allow_infinity=False).map(
                          lambda f: f"{f!r}" if "." in repr(f) or "e" in repr(f) else f"{f}.5"),
                      WORD)


@FUZZ
@given(key=st.sampled_from(["steps", "eval_interval", "batch_size", "threads"]),
       value=BAD_COUNT)
def test_bad_run_settings(stored, key, value):
    if key != "steps" and isinstance(value, int) and value > 0:
        return  # only steps has an upper bound
    line = fails(["run", f"harness.{key}={value}", f"harness.out_dir={stored[0]}"])
    assert f"harness.{key}" in line
    assert "positive integer" in line or "absurd" in line or "bad override" in line
    unharmed(stored)


@FUZZ
@given(seed=st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32, max_value=2**80),
                      WORD))
def test_bad_seeds(stored, seed):
    line = fails(["run", f"seed={seed}", f"harness.out_dir={stored[0]}"])
    assert "seed must be an integer in [0, 2**32)" in line
    out = stored[0] / "single"
    line = fails(["bench", "--seeds", f"0,{seed}", "--scenarios", "mlp-clean", "--out", str(out)])
    assert "--seeds" in line
    unharmed(stored)


@FUZZ
@given(workers=st.one_of(st.integers(max_value=0), st.integers(min_value=1025), WORD))
def test_bad_workers(stored, workers, tmp_path):
    out = tmp_path / "never"
    line = fails(["bench", "--workers", str(workers), "--scenarios", "mlp-clean", "--out",
                  str(out)])
    assert "--workers" in line
    assert not out.exists(), "a rejected sweep created its folder"
    unharmed(stored)


@FEW
@given(key=st.sampled_from(["harness.stepz", "optim.learning_rate", "steps", "harness.seed"]),
       junk=st.sampled_from(["[1", "{a:", "=", "'x", "1,2]", "${oops"]))
def test_bad_override_syntax_and_keys(stored, key, junk):
    line = fails(["run", f"{key}=1", f"harness.out_dir={stored[0]}"])
    assert f"unknown setting '{key}'" in line and "(valid: " in line
    line = fails(["run", f"harness.steps={junk}", f"harness.out_dir={stored[0]}"])
    assert "bad override" in line or "harness.steps" in line
    unharmed(stored)


PAIRS = sorted((b.id, m) for b in list_bugs() for m in ALL_MODELS if m not in b.models)


@FUZZ
@given(pair=st.sampled_from(PAIRS))
def test_bug_that_does_not_apply(stored, pair):
    bug, model = pair
    line = fails(["run", f"model={model}", f"bug={bug}", f"harness.out_dir={stored[0]}"])
    assert f"bug '{bug}' does not apply to model '{model}'" in line and "applies to: " in line
    unharmed(stored)


@FUZZ
@given(sub=NAME, verb=st.sampled_from(["run", "bench", "score"]))
def test_missing_or_unwritable_results_folder(stored, sub, verb, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    target = blocker / sub  # a folder can never be made under a regular file
    if verb == "run":
        line = fails(["run", "scenario=mlp-clean", f"harness.out_dir={target}"])
    elif verb == "bench":
        line = fails(["bench", "--scenarios", "mlp-double_softmax", "--out", str(target)])
    else:
        line = fails(["score", str(tmp_path / sub)])
    assert "not writable" in line or "no sweep folder" in line
    assert str(target if verb != "score" else tmp_path / sub) in line
    unharmed(stored)


@pytest.mark.parametrize("verb", ["run", "bench"])
def test_a_results_folder_that_is_a_file_is_named_as_one(stored, verb, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    args = (["run", "scenario=mlp-clean", f"harness.out_dir={blocker}"] if verb == "run" else
            ["bench", "--scenarios", "mlp-double_softmax", "--out", str(blocker)])
    line = fails(args)
    assert f"results folder {blocker} is a file: give a folder" in line, line
    assert blocker.read_text() == "not a folder"
    unharmed(stored)


@pytest.fixture
def scenario_copy(tmp_path, monkeypatch):
    """A private copy of scenarios/ that this process composes from."""
    folder = tmp_path / "scenarios"
    shutil.copytree(SCENARIO_DIR, folder)
    monkeypatch.setattr(scenario_registry, "SCENARIO_DIR", folder)
    scenario_registry.registry.cache_clear()
    yield folder
    scenario_registry.registry.cache_clear()


@FUZZ
@given(text=st.one_of(st.text(max_size=60), st.sampled_from(
    ["scenario: [", "defaults:\n - override /model: mlp\n  bad", "- 1\n- 2", "{a: 1",
     "scenario: other-name", "\t", "scenario: mlp-fuzzed\n  x: : y"])))
def test_malformed_scenario_yaml(stored, scenario_copy, text):
    """(``bugzoo run`` reads scenarios the same way: see the console-script test.)"""
    bad = scenario_copy / "mlp-fuzzed.yaml"
    bad.write_text(text)
    scenario_registry.registry.cache_clear()
    assert f"malformed scenario file {bad}" in fails(["list", "scenarios"])
    bad.unlink()
    scenario_registry.registry.cache_clear()
    unharmed(stored)


# ---------------------------------------------------------------- the real console script
def _script(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("bugzoo")
    assert exe, "the bugzoo console script is not installed"
    return subprocess.run([exe, *argv], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.slow
def test_console_script_bad_input(stored, tmp_path):
    root = tmp_path / "root"  # a private BUGZOO_ROOT with a malformed scenario
    shutil.copytree(CONF_DIR, root / "conf")
    shutil.copytree(SCENARIO_DIR, root / "scenarios")
    (root / "scenarios" / "mlp-broken.yaml").write_text("scenario: mlp-broken\n  x: : y\n")
    env = {**faults.env_with(tmp_path), "BUGZOO_ROOT": str(root)}
    cases = [
        (["run", "scenario=mlp-clen", f"harness.out_dir={stored[0]}"], None,
         "did you mean 'mlp-clean'?"),
        (["run", "harness.steps=[1", f"harness.out_dir={stored[0]}"], None, "bad override"),
        (["list", "scenarios"], env, "malformed scenario file"),
        (["run", "scenario=mlp-clean", f"harness.out_dir={stored[0]}"], env, "mlp-broken.yaml"),
    ]
    for argv, environ, expected in cases:
        done = _script(*argv, env=environ)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (argv, done.stderr[-800:])
        assert len(lines) == 1 and expected in lines[0], (argv, done.stderr[-800:])
    unharmed(stored)
