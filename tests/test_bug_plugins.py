"""Bug plug-ins and scenario folders that are wrong get one line naming the package or the
file (exit 2), and `bugzoo check-bug` fails a plant that shows before its onset (#20)."""

from __future__ import annotations

import contextlib
import io
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from bugzoo.cli import main
from bugzoo.paths import SCENARIO_DIR, SCENARIO_PATH_ENV

CARD = dict(title="t", category="loss", symptom="s", explanation="e", buggy="b", fixed="f",
            models=("mlp",))


def install(site: Path, dist: str, bugs: dict[str, str], module: str = "") -> Path:
    """A distribution ``dist`` under ``site``: ``module`` as ``<dist>.py`` and one entry point
    in ``bugzoo.bugs`` per item of ``bugs`` (id -> value)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{dist}.py").write_text(textwrap.dedent(module))
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[bugzoo.bugs]\n" + "".join(f"{k} = {v}\n" for k, v in bugs.items()))
    return site


def bug_module(bug_id: str, **card) -> str:
    fields = {**CARD, **card}
    return (f"from bugzoo.bugs import Bug, SymptomCheck\n"
            f"BUG = Bug(id={bug_id!r}, check=SymptomCheck('final_val_loss', 'higher'), "
            + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")\n")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def fails(*argv: str) -> str:
    """The one line a refused command prints (exit 2, no traceback)."""
    code, _, err = cli(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-800:]
    return lines[0]


@pytest.fixture
def site(tmp_path, monkeypatch) -> Iterator[Path]:
    """A folder on sys.path for this test's distributions (the plug-in scan keys on sys.path);
    the modules imported from it are forgotten afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if str(folder) in str(getattr(sys.modules[name], "__file__", "")):
            del sys.modules[name]


BAD_PLUGINS = {
    "import": ({"mylab/gone": "bugzoo_gone_module:BUG"}, "",
               "bug plug-in 'mylab/gone' from package badbugs 0.1 cannot be imported "
               "(bugzoo_gone_module:BUG): ModuleNotFoundError"),
    "card": ({"mylab/blank": "badbugs:BUG"}, bug_module("mylab/blank", title=" ", fixed=""),
             "bug plug-in 'mylab/blank' from package badbugs 0.1: incomplete card "
             "(empty title, empty fixed)"),
    "field": ({"mylab/short": "badbugs:BUG"},
              "from bugzoo.bugs import Bug\nBUG = Bug(id='mylab/short', title='t')\n",
              "bug plug-in 'mylab/short' from package badbugs 0.1 cannot be imported "
              "(badbugs:BUG): TypeError"),
    "plain id": ({"label_noise": "badbugs:BUG"}, bug_module("label_noise"),
                 "bug plug-in 'label_noise' from package badbugs 0.1: a plug-in's id is "
                 "'<namespace>/<name>'"),
    "other id": ({"mylab/one": "badbugs:BUG"}, bug_module("mylab/two"),
                 "has id 'mylab/two'; the entry point's name must be the bug's id"),
    "no bug": ({"mylab/none": "badbugs"}, "X = 1\n",
               "badbugs is neither a bugzoo.bugs.Bug nor a module holding one as BUG"),
}


@pytest.mark.parametrize("case", BAD_PLUGINS)
def test_a_bad_plugin_is_one_line_naming_its_package(site, case):
    entry_points, module, expected = BAD_PLUGINS[case]
    install(site, "badbugs", entry_points, module)
    for argv in (["list", "bugs"], ["show", "double_softmax"], ["run", "scenario=mlp-clean"]):
        line = fails(*argv)
        assert line.startswith(f"bugzoo {argv[0]}: error: ") and expected in line, line


def test_a_duplicate_bug_id_names_both_packages(site):
    for dist in ("labone", "labtwo"):
        install(site, dist, {"mylab/dup": f"{dist}:BUG"}, bug_module("mylab/dup"))
    line = fails("list", "bugs")
    assert "bug id 'mylab/dup' is registered twice: by package labone 0.1 (labone:BUG) and by " \
           "package labtwo 0.1 (labtwo:BUG)" in line, line


def test_a_plugin_bug_is_listed_shown_and_composed_with_its_defaults(site):
    install(site, "goodbugs", {"mylab/fine": "goodbugs:BUG"},
            bug_module("mylab/fine", onset=7, params={"k": 3}))
    code, out, _ = cli("list", "bugs")
    assert code == 0
    row = next(line for line in out.splitlines() if "mylab/fine" in line)
    assert row.split()[-1] == "goodbugs" and "double_softmax" in out  # built-ins stay
    assert cli("show", "mylab/fine")[1].startswith("mylab/fine — t")
    from bugzoo.config import compose_run

    cfg = compose_run(["model=mlp", "bug=mylab/fine"])
    assert (cfg.bug.id, cfg.bug.onset, dict(cfg.bug.params)) == ("mylab/fine", 7, {"k": 3})
    assert "did you mean 'mylab/fine'" in fails("show", "mylab/fien")


# ---------------------------------------------------------------- scenario folders
@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """An outside scenario folder; the scenario path is restored after the test."""
    monkeypatch.setenv(SCENARIO_PATH_ENV, "")
    path = tmp_path / "lab scenarios"
    path.mkdir()
    return path


def test_an_included_folder_adds_scenarios_to_every_verb(folder, monkeypatch):
    (folder / "mlp-clean-lab_width80.yaml").write_text(
        "scenario: mlp-clean-lab_width80\ndescription: lab width\ndefaults:\n  - override /model: mlp\n"
        "model: {params: {width: 80}}\n")
    code, out, _ = cli("list", "scenarios", "--include", str(folder))
    assert code == 0 and "mlp-clean-lab_width80" in out and "mlp-double_softmax" in out
    from bugzoo.scenarios import get_scenario

    assert get_scenario("mlp-clean-lab_width80").path == folder / "mlp-clean-lab_width80.yaml"
    monkeypatch.setenv(SCENARIO_PATH_ENV, "")  # the variable works alone as well
    assert "mlp-clean-lab_width80" not in cli("list", "scenarios")[1]
    monkeypatch.setenv(SCENARIO_PATH_ENV, str(folder))
    assert "mlp-clean-lab_width80" in cli("list", "scenarios")[1]


def test_a_duplicate_scenario_id_names_both_files(folder):
    (folder / "mlp-clean.yaml").write_text("scenario: mlp-clean\n")
    line = fails("list", "scenarios", f"--include={folder}")
    assert (f"duplicate scenario id 'mlp-clean': {SCENARIO_DIR / 'mlp-clean.yaml'} and "
            f"{folder / 'mlp-clean.yaml'}") in line, line


@pytest.mark.parametrize(("text", "line", "problem"), [
    ("scenario: mlp-odd\ndescription: x\ndefaults: {model: mlp}\n", 3,
     "'defaults' must be a list"),
    ("# a comment\nscenario: mlp-other\n", 2, "it must be a mapping with 'scenario: mlp-odd'"),
    ("scenario: mlp-odd\ndefaults:\n  - override /model: mlp\n  bad: [\n", 4, ""),
])
def test_a_malformed_file_names_the_file_and_the_line(folder, text, line, problem):
    (folder / "mlp-odd.yaml").write_text(text)
    message = fails("bench", "--include", str(folder), "--scenarios", "mlp-odd")
    assert f"malformed scenario file {folder / 'mlp-odd.yaml'} line {line}: {problem}" in message


def test_an_include_that_is_no_folder_is_refused(tmp_path, folder):
    assert fails("list", "scenarios", "--include", str(tmp_path / "nope")) == (
        f"bugzoo list: error: --include {tmp_path / 'nope'}: not a folder")
    assert "--include needs a folder" in fails("run", "--include")  # taken before Hydra parses
    assert "argument --include: expected one argument" in fails("results", "validate", "--include")


# ---------------------------------------------------------------- check-bug
LEAKY = """
from bugzoo.bugs.base import Bug, SymptomCheck, patch_method
from torch.nn import functional as F


def hot_loss(self, logits, y):
    return 3.0 * F.cross_entropy(logits, y)


class Leaky(Bug):
    def before_build(self, trainer):
        patch_method(trainer, "compute_loss", hot_loss)  # no active=: it ignores the onset


BUG = Leaky(id="mylab/leaky", check=SymptomCheck("final_loss", "higher"), **{card!r})
"""


def test_check_bug_fails_a_plant_that_shows_before_its_onset(site):
    install(site, "leakybugs", {"mylab/leaky": "leakybugs"}, LEAKY.replace("{card!r}", repr(CARD)))
    code, out, err = cli("check", "bug", "mylab/leaky")
    assert code == 1 and "ok   check_card: the card is complete" in out
    assert "FAIL check_plant [mlp]: the trace differs from the control's before the onset " \
           "(step 8)" in err, err
    assert "did you mean 'mylab/leaky'" in fails("check", "bug", "mylab/leacky")
    assert "does not apply to model(s) lstm" in fails("check", "bug", "mylab/leaky", "--model",
                                                      "lstm")


def test_check_bug_api_on_a_builtin_whose_scenario_is_unproven():
    """The API a plug-in's own tests call; an unproven scenario's reason stands in for validate."""
    import bugzoo
    from bugzoo.judge import bugcheck

    found = dict(bugcheck.bug_checks("leakage_norm_stats", models=["mlp"]))
    assert list(found) == ["check_card", *(f"{c.__name__} [mlp]" for c in bugcheck.PER_MODEL)]
    assert found["check_validate [mlp]"].startswith("not required: the scenario is unproven (")
    assert found["check_plant [mlp]"].startswith("the plant changes the run (it is planted when")
    assert bugzoo.check_bug is bugcheck.check_bug


def test_a_plugin_scenario_is_keyed_like_the_catalogue_s(site, folder, monkeypatch):
    """A scenario from an outside folder with a plug-in's bug gets a key from its file and its
    bug's code, so an edit of either makes its stored runs stale; a docstring does not."""
    from bugzoo import release
    from bugzoo.paths import include

    module = bug_module("mylab/keyed") + "\n\ndef plant(loss):\n    return loss * 2\n"
    install(site, "keyedbugs", {"mylab/keyed": "keyedbugs:BUG"}, module)
    (folder / "mlp-mylab--keyed.yaml").write_text(
        "scenario: mlp-mylab--keyed\ndefaults:\n  - override /model: mlp\n"
        "  - override /bug: mylab/keyed\n")
    monkeypatch.setenv(SCENARIO_PATH_ENV, "")
    include([str(folder)])

    def key() -> str:
        release._outside_key.cache_clear()
        return release.scenario_key("mlp-mylab--keyed")

    first = key()
    assert first is not None and first != release.scenario_key("mlp-double_softmax")
    (site / "keyedbugs.py").write_text(module.replace('def plant(loss):\n',
                                                      'def plant(loss):\n    """Doubled."""\n'))
    assert key() == first  # a docstring decides no run
    (site / "keyedbugs.py").write_text(module.replace("loss * 2", "loss * 3"))
    assert key() != first
    (site / "keyedbugs.py").write_text(module)
    assert key() == first
    (folder / "mlp-mylab--keyed.yaml").write_text(
        (folder / "mlp-mylab--keyed.yaml").read_text() + "harness:\n  steps: 50\n")
    assert key() != first
    release._outside_key.cache_clear()
