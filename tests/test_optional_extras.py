"""The integrations' libraries are optional: bugzoo and its CLI never import them, and a
missing one is a one-line error naming the extra to install."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest
from conftest import quick_cfg

from bugzoo.cli import main
from bugzoo.harness.runner import execute_and_store

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_integration_that_needs_a_library_imports_it():
    """Read, not run: a module-level import of an optional library, or of the integration that
    holds one, only where that integration is (``import bugzoo`` and every verb need none)."""
    owners = {"lightning": "lightning", "transformers": "huggingface",
              "tensorboard": "tensorboard", "torch.utils.tensorboard": "tensorboard",
              "inspect_ai": "agent_eval"}
    holders = set(owners.values())  # an integration that imports no optional library is free
    for path in sorted((ROOT / "bugzoo").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body + [n for t in tree.body if isinstance(t, ast.Try) for n in t.body]:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                owner = next((o for lib, o in owners.items()
                              if name == lib or name.startswith(f"{lib}.")), None)
                if name.startswith("bugzoo.integrations.") and name.rsplit(".", 1)[1] in holders:
                    owner = name.rsplit(".", 1)[1]
                assert owner in (None, path.stem), f"{path.relative_to(ROOT)} imports {name}"


@pytest.mark.parametrize(("module", "library", "extra"), [
    ("bugzoo.integrations.lightning", "lightning.pytorch", "lightning"),
    ("bugzoo.integrations.huggingface", "transformers", "huggingface"),
    ("bugzoo.teach.tasks.agent_eval", "inspect_ai", "agents"),
])
def test_a_missing_library_names_its_extra(module, library, extra, monkeypatch):
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, library, None)  # as if it were not installed
    with pytest.raises(ImportError, match=rf'pip install "bugzoo-bench\[{extra}\]"') as raised:
        importlib.import_module(module)
    assert "\n" not in str(raised.value)


def test_tensorboard_without_its_library_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    _, run = execute_and_store(quick_cfg("model=mlp", steps=3), tmp_path, "sw")
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    assert main(["tensorboard", run, "--logdir", str(tmp_path / "tb")]) == 2
    err = capsys.readouterr().err.strip()
    assert 'pip install "bugzoo-bench[tensorboard]"' in err and "\n" not in err
    assert not (tmp_path / "tb").exists() or not any((tmp_path / "tb").rglob("events.*"))
