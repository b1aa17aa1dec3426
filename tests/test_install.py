"""Installs: a wheel built from the checkout carries everything ``bugzoo run`` needs."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_list_names_every_package():
    """pyproject.toml lists packages by hand (the detectors folder maps to another name):
    a new subpackage must be added there, or a wheel would leave it out."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "bugzoo").rglob("__init__.py")}
    assert found | {"bugzoo_detectors", "bugzoo._data.conf", "bugzoo._data.scenarios"} == set(
        tool["packages"])
    assert tool["package-dir"] == {"bugzoo_detectors": "detectors",
                                   "bugzoo._data.conf": "conf",
                                   "bugzoo._data.scenarios": "scenarios"}


def borrowed_site_packages() -> list[str]:
    """Where this interpreter's dependencies are installed, in a virtualenv or not."""
    return list(dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"],
                               sysconfig.get_paths()["platlib"]]))


@pytest.mark.slow
def test_a_wheel_installs_and_runs_a_scenario(tmp_path):
    """Build a wheel, install it (no source checkout in sight) into a fresh virtual environment
    that borrows torch and the other dependencies from the environment the tests run in (a
    ``.pth`` file naming its site-packages: a virtualenv's ``system_site_packages`` would borrow
    the base interpreter's instead), and run a scenario."""
    source = tmp_path / "source"  # a copy: an in-tree build leaves build/ and egg-info behind
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "results", "build", "*.egg-info", "__pycache__", ".*_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp_path / "dist")],
                   check=True, capture_output=True, cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("bugzoo_bench-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    # appended after the venv's own site-packages: the wheel's bugzoo comes first, and the
    # borrowed folders' own .pth files (an editable bugzoo among them) are not processed
    (Path(own) / "borrowed.pth").write_text("\n".join(borrowed_site_packages()) + "\n")
    subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                   check=True, capture_output=True)
    where = subprocess.run(
        [python, "-c", "import bugzoo, bugzoo.paths, bugzoo_detectors; "
         "print(bugzoo.__file__); print(bugzoo.paths.ROOT); print(bugzoo_detectors.__file__)"],
        check=True, capture_output=True, text=True, cwd=tmp_path).stdout.split()
    assert all(str(env_dir) in line for line in where), where  # not this checkout
    assert where[1].endswith("bugzoo/_data")
    done = subprocess.run(
        [env_dir / "bin" / "bugzoo", "run", "scenario=mlp-init_too_large", "harness.steps=5",
         "harness.eval_interval=5", "harness.out_dir=runs", "+detector.nonfinite={}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "runs/single/mlp-init_too_large/seed0/summary.json").is_file()
    assert "detector  nonfinite" in done.stdout
