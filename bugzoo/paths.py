"""Where the product's configuration lives: ``conf/`` (Hydra building blocks) and ``scenarios/``.

In a source checkout (an editable install) they are the top-level folders beside ``bugzoo/``;
a wheel ships them inside the package as ``bugzoo/_data/conf`` and ``bugzoo/_data/scenarios``
(``pyproject.toml`` maps them there). ``BUGZOO_ROOT`` points at another root holding both.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


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
