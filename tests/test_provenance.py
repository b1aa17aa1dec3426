"""Keys follow what a result's computation reads: a comment or docstring moves none, a change of
behaviour moves the keys of the results it decides and no others."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from bugzoo import provenance, release
from bugzoo.judge import out_of_sample, validity
from bugzoo.provenance import Codebase
from bugzoo.teach.tasks import carry
from bugzoo.teach.tasks.exported import pair_key
from bugzoo.teach.tasks.taskset import set_key

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ["mlp-double_softmax", "lstm-lr_too_high", "gpt-init_repeated"]


def write_package(root: Path, files: dict[str, str]) -> Codebase:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Codebase(root, "pkg", unfollowed=())


def test_comments_docstrings_and_layout_move_no_key_and_behaviour_does(tmp_path):
    files = {"__init__.py": "", "a.py": '''
        """Module a."""
        import torch.nn.functional as F

        from pkg.b import helper


        def entry(x):
            """Docs."""
            return helper(F.relu(x))  # a comment
        ''', "b.py": '''
        def helper(x):
            return x + 1


        def unrelated():
            return 0
        '''}
    files = {name: textwrap.dedent(text) for name, text in files.items()}
    before = write_package(tmp_path / "one", files).key("pkg.a:entry")
    files["a.py"] = files["a.py"].replace('"""Docs."""', '"""Other docs,\n    on two lines."""')
    files["a.py"] = files["a.py"].replace("# a comment", "").replace(
        "helper(F.relu(x))", "helper(\n        F.relu(x))")
    files["b.py"] += "\n\ndef more():\n    return 2\n"
    assert write_package(tmp_path / "two", files).key("pkg.a:entry") == before
    moved = dict(files, **{"b.py": files["b.py"].replace("x + 1", "x + 2")})
    assert write_package(tmp_path / "three", moved).key("pkg.a:entry") != before
    rebound = dict(files, **{"a.py": files["a.py"].replace(
        "import torch.nn.functional as F", "import torch as F")})
    assert write_package(tmp_path / "four", rebound).key("pkg.a:entry") != before


def test_what_only_type_checkers_import_is_not_followed(tmp_path):
    code = write_package(tmp_path, {"__init__.py": "", "a.py": textwrap.dedent('''
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from pkg.b import Thing


        def entry(thing: "Thing"):
            return thing
        '''), "b.py": "class Thing:\n    pass\n"})
    assert {module for module, _ in code.reached("pkg.a:entry")} == {"pkg.a"}



def test_a_module_used_through_its_attributes_reaches_only_those_it_names(tmp_path):
    files = {"__init__.py": "", "a.py": textwrap.dedent('''
        from pkg import b


        def entry(x):
            return b.helper(x)


        def hands_over():
            return b
        '''), "b.py": "def helper(x):\n    return x + 1\n\n\ndef unrelated():\n    return 0\n"}
    before = write_package(tmp_path / "one", files)
    assert {unit for unit in before.reached("pkg.a:entry") if unit[0] == "pkg.b"} == {
        ("pkg.b", "helper"), ("pkg.b", "")}
    assert ("pkg.b", "unrelated") in before.reached("pkg.a:hands_over")  # the module itself
    edited = dict(files, **{"b.py": files["b.py"].replace("return 0", "return 1")})
    after = write_package(tmp_path / "two", edited)
    assert after.key("pkg.a:entry") == before.key("pkg.a:entry")
    assert after.key("pkg.a:hands_over") != before.key("pkg.a:hands_over")

@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """An editable copy of bugzoo that every key reads, with the key caches emptied."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "bugzoo", copy / "bugzoo",
                    ignore=shutil.ignore_patterns("__pycache__"))

    def keys(read_copy: bool = True) -> dict[str, object]:
        """Every kind of key, read afresh (from the copy, once it is the package)."""
        if read_copy:
            monkeypatch.setattr(provenance, "CODE", Codebase(copy))
        for cached in (release.live_manifest, release._module_key, carry._code,
                       carry.scenario_part):
            cached.cache_clear()
        return {"runs": {s: release.scenario_key(s) for s in SCENARIOS},
                "validity": {s: validity.row_key([s, "mlp-clean"], [0, 1], []) for s in SCENARIOS},
                "validate": {s: pair_key(s) for s in SCENARIOS[:1]},
                "set": {s: set_key(s, 0) for s in SCENARIOS[:1]},
                "grades": {solver: carry.grade_key("k", "mlp", solver)
                           for solver in ("noop", "oracle", "rules")}}

    def edit(relative: str, old: str, new: str) -> None:
        """Replace the first ``old`` in the copy's ``relative`` file."""
        path = copy / "bugzoo" / relative
        text = path.read_text()
        assert old in text, (relative, old)
        path.write_text(text.replace(old, new, 1))

    before = keys(read_copy=False)
    assert keys() == before  # the copy is the package
    yield copy, edit, keys, before
    monkeypatch.undo()
    keys(read_copy=False)


def test_a_comment_or_docstring_in_the_telemetry_or_a_bug_moves_no_key(package_copy):
    _, edit, keys, before = package_copy
    edit("telemetry.py", "def heap_mb() -> float:\n",
         "def heap_mb() -> float:\n    # a comment\n")
    edit("telemetry.py", '"""', '"""Reworded. ')
    edit("bugs/double_softmax.py", '"""', '"""Reworded.\n\n')
    assert keys() == before


def test_a_version_bump_moves_no_key(package_copy):
    _, edit, keys, before = package_copy
    edit("__init__.py", '__version__ = "', '__version__ = "9')  # stamps and cache folders read it
    assert keys() == before


def test_a_behaviour_edit_in_summarize_moves_the_runs_and_validity_rows_it_decides(
        package_copy):
    _, edit, keys, before = package_copy
    edit("harness/record.py", '"steps_completed": int(len(trace)),',
         '"steps_completed": int(len(trace)) + 0,')
    after = keys()
    assert all(after["runs"][s] != before["runs"][s] for s in SCENARIOS)
    assert all(after["validity"][s] != before["validity"][s] for s in SCENARIOS)
    assert after["grades"]["noop"] == before["grades"]["noop"]  # a solver reads no run


def test_a_plant_edit_moves_its_scenarios_and_an_export_delta_moves_none(package_copy):
    _, edit, keys, before = package_copy
    edit("bugs/double_softmax.py", '"return torch.softmax(self.head(self.backbone(x)), dim=-1)"',
         '"return self.head(self.backbone(x)).softmax(-1)"')  # a delta: makes scripts only
    assert keys()["runs"] == before["runs"]
    edit("bugs/double_softmax.py", ".softmax(dim=-1)\n", ".softmax(dim=0)\n")
    runs = keys()["runs"]
    assert runs["mlp-double_softmax"] != before["runs"]["mlp-double_softmax"]
    assert {s: runs[s] for s in SCENARIOS[1:]} == {s: before["runs"][s] for s in SCENARIOS[1:]}


def test_a_bug_built_on_another_bugs_plant_moves_with_it(package_copy):
    _, edit, keys, before = package_copy
    edit("bugs/reinit_every_epoch.py", "model.apply(GPT.init_weights)",
         "model.apply(GPT.init_weights) or None")
    assert keys()["runs"]["gpt-init_repeated"] != before["runs"]["gpt-init_repeated"]


def test_editing_one_solver_regrades_only_its_rows_and_trains_nothing_else(package_copy):
    _, edit, keys, before = package_copy
    edit("teach/tasks/solvers.py", '"explanation": answer["title"]})',
         '"explanation": answer["title"] + ""})')
    after = keys()
    assert after["grades"]["oracle"] != before["grades"]["oracle"]
    assert {k: v for k, v in after.items() if k != "grades"} == {
        k: v for k, v in before.items() if k != "grades"}
    assert after["grades"]["noop"] == before["grades"]["noop"]
    assert after["grades"]["rules"] == before["grades"]["rules"]


def test_editing_one_detector_reruns_no_training_run(package_copy, tmp_path, monkeypatch):
    _, _, keys, before = package_copy
    detectors = tmp_path / "detectors"
    shutil.copytree(ROOT / "detectors", detectors, ignore=shutil.ignore_patterns("__pycache__"))
    path = detectors / "loss_plateau.py"
    path.write_text(path.read_text() + "\nCHANGED = True\n")
    monkeypatch.setattr(out_of_sample, "DETECTORS_DIR", detectors)
    monkeypatch.setattr(out_of_sample.detectors_digest, "__defaults__", (detectors,))
    after = keys()
    assert after["grades"]["rules"] != before["grades"]["rules"]  # it runs the detectors
    assert {k: v for k, v in after.items() if k != "grades"} == {
        k: v for k, v in before.items() if k != "grades"}
    assert after["grades"]["oracle"] == before["grades"]["oracle"]
