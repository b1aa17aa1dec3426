"""Where the product's configuration lives: ``conf/`` (Hydra building blocks) and ``scenarios/``.

In a source checkout (an editable install) they are the top-level folders beside ``bugzoo/``;
a wheel ships them inside the package as ``bugzoo/_data/conf`` and ``bugzoo/_data/scenarios``
(``pyproject.toml`` maps them there). ``BUGZOO_ROOT`` points at another root holding both.

What bugzoo keeps to avoid doing again (task-script runs, Hydra compositions) lives under
``BUGZOO_CACHE`` (default ``~/.cache/bugzoo``), one folder per kind and bugzoo version; it can be
deleted at will, and ``BUGZOO_CACHE=off`` turns it off.

Scenario folders from outside come after the built-in one: ``BUGZOO_SCENARIO_PATH`` (folders
separated by ``os.pathsep``), which ``--include DIR`` on any verb extends, so every process the
verb starts (sweep workers, ranks, Hydra jobs) reads the same scenarios.
"""

from __future__ import annotations

import os
from pathlib import Path

from bugzoo import __version__
from bugzoo.errors import UsageError

PACKAGE = Path(__file__).resolve().parent
SCENARIO_PATH_ENV = "BUGZOO_SCENARIO_PATH"
CACHE_ENV = "BUGZOO_CACHE"


def _root() -> Path:
    if env := os.environ.get("BUGZOO_ROOT"):
        return Path(env)
    checkout = PACKAGE.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "conf" / "config.yaml").is_file():
        return checkout
    return PACKAGE / "_data"


ROOT = _root()
CONF_DIR = ROOT / "conf"
SCENARIO_DIR = ROOT / "scenarios"


def included_folders() -> tuple[Path, ...]:
    """The outside scenario folders on ``BUGZOO_SCENARIO_PATH``, in order, without repeats."""
    parts = os.environ.get(SCENARIO_PATH_ENV, "").split(os.pathsep)
    folders = tuple(dict.fromkeys(Path(p).resolve() for p in parts if p))
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{SCENARIO_PATH_ENV} names {folder}, which is not a folder")
    return folders


def include(folders: list[str]) -> None:
    """Add ``folders`` to ``BUGZOO_SCENARIO_PATH`` (``--include DIR``); a path that is not a
    folder is refused, naming it."""
    if not folders:
        return
    for folder in folders:
        if not Path(folder).is_dir():
            raise UsageError(f"--include {folder}: not a folder")
    os.environ[SCENARIO_PATH_ENV] = os.pathsep.join(
        [str(p) for p in included_folders()] + [str(Path(f).resolve()) for f in folders])


def cache_folder(kind: str) -> Path | None:
    """This bugzoo version's folder of kept ``kind`` (``task-runs``, ``compositions``), or
    ``None`` when ``BUGZOO_CACHE`` is ``off``."""
    root = os.environ.get(CACHE_ENV, str(Path.home() / ".cache" / "bugzoo"))
    return None if root == "off" else Path(root) / kind / __version__
