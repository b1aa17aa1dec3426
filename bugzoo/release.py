"""The benchmark release: ``bugzoo-bench 1.2``, frozen and stamped.

The manifest lists every built-in scenario with the hashes of what decides its runs: its config
file, its bug's code (less its export deltas, which make scripts, not runs) and its data
generator; and the hash of the code every run shares (the clean loop, the models, the
telemetry, ``conf/``). The release digest is one hash of it all.
Every run records the digest, and so does every leaderboard and report made from runs;
``bugzoo score`` refuses to mix runs of different digests. ``results/release.json`` is the
manifest as released (``python -m bugzoo.release``), and a test holds the code to it: a
change to a scenario, a bug, a dataset or the loop needs a new release, in ``CHANGELOG.md``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import sys
from pathlib import Path

from bugzoo.models import get_model
from bugzoo.paths import CONF_DIR, PACKAGE, SCENARIO_DIR
from bugzoo.scenarios import load_scenario

RELEASE = "bugzoo-bench 1.2"
MANIFEST = Path("results/release.json")
# the code every run shares, besides its scenario, its bug and its data
SHARED = ("train.py", "telemetry.py", "bugs/base.py", "models", "data/base.py", "data/augment.py")


def file_hash(*paths: Path) -> str:
    """SHA-256 over the files' contents (folders: their ``.py`` and ``.yaml`` files, sorted)."""
    h = hashlib.sha256()
    for path in paths:
        files = (sorted(p for p in path.rglob("*") if p.suffix in (".py", ".yaml"))
                 if path.is_dir() else [path])
        for file in files:
            h.update(file.read_bytes())
    return h.hexdigest()[:16]


def without_export_deltas(path: Path) -> bytes:
    """A bug module's bytes less its export deltas (every ``reproducers=`` argument): a delta
    makes a standalone script (``bugzoo export``, proven by ``bugzoo task validate``), never a
    run, so writing one needs no new release."""
    source = path.read_bytes()
    starts = [0, *(i + 1 for i, byte in enumerate(source) if byte == ord("\n"))]
    cuts = sorted((starts[kw.lineno - 1] + kw.col_offset,
                   starts[kw.end_lineno - 1] + kw.end_col_offset)
                  for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
                  for kw in node.keywords if kw.arg == "reproducers")
    kept, at = [], 0
    for start, end in cuts:
        kept.append(source[at:start])
        at = end
    return b"".join([*kept, source[at:]])


def bug_hash(path: Path) -> str:
    return hashlib.sha256(without_export_deltas(path)).hexdigest()[:16]


def manifest() -> dict:
    """The release's manifest: per scenario, the hashes of its config, bug code and data
    generator; the hash of the shared code; the digest of all of it."""
    scenarios = {}
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        scenario = load_scenario(path)
        dataset = (scenario.settings.get("defaults") or {}).get("data") or get_model(
            scenario.model).dataset
        scenarios[scenario.id] = {
            "config": file_hash(path),
            "bug": bug_hash(PACKAGE / "bugs" / f"{scenario.bug}.py") if scenario.bug else None,
            "data": file_hash(PACKAGE / "data" / f"{dataset}.py"),
        }
    shared = file_hash(*(PACKAGE / p for p in SHARED), CONF_DIR)
    body = {"release": RELEASE, "shared": shared, "scenarios": scenarios}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return {**body, "digest": digest}


@functools.cache
def digest() -> str:
    """This checkout's release digest (computed once per process)."""
    return manifest()["digest"]


def stamp() -> str:
    """``bugzoo-bench 1.0 (digest ...)``: what every run, leaderboard and report carries."""
    return f"{RELEASE} (digest {digest()})"


def main() -> int:
    MANIFEST.parent.mkdir(parents=True, exist_ok=True)
    MANIFEST.write_text(json.dumps(manifest(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {MANIFEST}: {stamp()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
