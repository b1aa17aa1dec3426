"""The package in layers: imports point down only, ids are parsed in one place, a deferred
import says why, and a bug changes a seam of the clean loop instead of copying a method."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bugzoo"
RANK = {"core": 0, "harness": 1, "integrations": 2, "judge": 3, "teach": 4, "tools": 5}
# bugzoo/__init__.py re-exports the plug-in contract from every layer (lazily, by name), and
# cli.py names the verbs of every layer (as "module:function" strings): both sit above them all
ABOVE_THE_LAYERS = {"__init__.py", "cli.py"}
# bugs whose mistake is two edits of the loop, each a seam of its own
TWO_SEAMS = {
    "step_every_k_without_zero": "a hand-rolled accumulation that forgets zero_grad: the "
                                 "optimizer steps every k batches and the gradients are never "
                                 "cleared",
    "ddp_unsynced": "two halves that come together: per-rank seeds and no DDP wrapper",
    "freeze_in_train_override": "the loop's freeze call moved into the backbone's train(): "
                                "the loop only configures the freeze, train() applies it",
}


def layer(module: str) -> str | None:
    """The layer of a ``bugzoo`` module (dotted name), or None for anything else."""
    parts = module.split(".")
    if parts[0] != "bugzoo":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in RANK else "core"


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        if path.relative_to(PACKAGE).as_posix() not in ABOVE_THE_LAYERS:
            found.append((".".join(p for p in relative.parts if p != "__init__"), path))
    return found


def imported(tree: ast.AST) -> list[tuple[str, int]]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append((node.module, node.lineno))
    return names


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_imports_point_down_only(module, path):
    mine = RANK[layer(module)]
    upward = [f"line {line}: {name} ({layer(name)})" for name, line in imported(ast.parse(
        path.read_text())) if layer(name) and RANK[layer(name)] > mine]
    assert not upward, f"{module} ({layer(module)}) imports a higher layer: {upward}"


DETECTOR_FILES = sorted((ROOT / "detectors").glob("*.py"))


@pytest.mark.parametrize("path", DETECTOR_FILES, ids=[p.stem for p in DETECTOR_FILES])
def test_built_in_detectors_import_only_the_public_contract(path):
    """detectors/ sits on the plug-in contract as a third party's detector would: it takes
    from bugzoo only what ``bugzoo`` exports (``Detector``, ``Alarm``, ``RunView``,
    ``Observation``, ...), and from its own package."""
    import bugzoo

    tree = ast.parse(path.read_text())
    wrong = [f"line {line}: {name}" for name, line in imported(tree)
             if name.startswith("bugzoo") and name not in ("bugzoo", "bugzoo_detectors")
             and not name.startswith("bugzoo_detectors.")]
    taken = {alias.name for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module == "bugzoo"
             for alias in node.names}
    wrong += [f"bugzoo.{name} is not exported" for name in taken - set(bugzoo.__all__)]
    assert not wrong, f"{path.name} reaches past the plug-in contract: {wrong}"


def test_the_cli_only_names_the_commands():
    from bugzoo.cli import COMMANDS

    tree = ast.parse((PACKAGE / "cli.py").read_text())
    assert {name for name, _ in imported(tree) if name.startswith("bugzoo")} == {
        "bugzoo", "bugzoo.errors", "bugzoo.paths"}
    todo = list(COMMANDS.values())
    while todo:  # each command lives in the layer its folder names
        command = todo.pop()
        todo += command.words.values()
        assert command.words or layer(command.target.split(":")[0]) in RANK


def test_deferred_imports_say_why():
    """An import inside a function keeps torch (or pytest) off a path that does not need it,
    and a comment on that line or the one above says so."""
    silent = []
    for module, path in modules():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        above = node.lineno - 2  # the line above this block of imports
                        while lines[above].strip().startswith(("import ", "from ")):
                            above -= 1
                        if ("#" not in lines[node.lineno - 1]
                                and not lines[above].strip().startswith("#")):
                            silent.append(f"{module}:{node.lineno}")
    assert not silent, f"function-level imports without a reason: {silent}"


def test_ids_are_parsed_only_by_the_scenario_module():
    parsing = [f"{p.relative_to(ROOT)}:{n}" for p in PACKAGE.rglob("*.py")
               for n, line in enumerate(p.read_text().splitlines(), 1)
               if 'split("-"' in line and p.name != "scenarios.py"]
    assert not parsing, parsing


class _Anonymous(ast.NodeTransformer):
    """Names and arguments erased: ``trainer.cfg`` and ``self.cfg`` read alike."""

    def visit_Name(self, node):
        return ast.copy_location(ast.Name(id="_", ctx=node.ctx), node)

    def visit_arg(self, node):
        return ast.copy_location(ast.arg(arg="_"), node)


def statements(function: ast.AST) -> set[str]:
    """Every statement inside a function (bare ``pass``/``return``/docstrings left out)."""
    found = set()
    for node in ast.walk(function):
        if (isinstance(node, ast.stmt) and node is not function
                and not isinstance(node, ast.Pass | ast.Return)
                and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))):
            found.add(ast.dump(_Anonymous().visit(ast.parse(ast.unparse(node)))))
    return found


def trainer_methods() -> dict[str, set[str]]:
    tree = ast.parse((PACKAGE / "train.py").read_text())
    trainer = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trainer")
    return {m.name: statements(m) for m in trainer.body if isinstance(m, ast.FunctionDef)}


BUG_FILES = sorted(p for p in (PACKAGE / "bugs").glob("*.py")
                   if p.stem not in ("__init__", "base"))


@pytest.mark.parametrize("path", BUG_FILES, ids=[p.stem for p in BUG_FILES])
def test_a_bug_changes_a_seam_instead_of_copying_a_method(path):
    tree = ast.parse(path.read_text())
    methods = trainer_methods()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef):
            mine = statements(function)
            for name, theirs in methods.items():
                shared = mine & theirs
                assert len(shared) < 2, (
                    f"{path.stem}.{function.name} repeats {len(shared)} statements of "
                    f"Trainer.{name}: add a seam to the clean loop and replace that instead")
    patches = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "id", None) == "patch_method"]
    assert len(patches) <= (2 if path.stem in TWO_SEAMS else 1), (
        f"{path.stem} patches {len(patches)} methods; a bug replaces one seam")


def test_the_layout_page_names_every_module():
    """Every module of the package is named on the layout page (a bug, a model, a dataset and
    a reproducer family by its folder)."""
    import re

    text = (ROOT / "docs" / "pages" / "layout.md").read_text()
    by_folder = {"bugs": ("base", "setup_delta"), "models": (), "data": (), "reproducers": ()}
    unnamed = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "bugzoo").rglob("*.py"))
               if path.name != "__init__.py"
               and path.stem in by_folder.get(path.parent.name, (path.stem,))
               and not re.search(rf"\b{re.escape(path.name)}\b", text)]
    assert not unnamed


def test_scoring_stored_runs_loads_no_training_code():
    """Scoring reads what runs recorded: the outcome and trace-set readers never load the
    training loop (they once rebuilt a Trainer for a run stored without its setup digest)."""
    code = ("import sys, bugzoo.judge.outcomes, bugzoo.harness.traceset; "
            "print(sorted(m for m in sys.modules if m in ('bugzoo.train', 'bugzoo.harness.runner')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
