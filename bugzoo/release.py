"""The benchmark release (``bugzoo-bench`` and the package's major.minor version), frozen and
stamped.

The manifest lists every built-in scenario with the keys (:mod:`bugzoo.provenance`) of what
decides its runs: its config, its bug's code (less its export deltas, which make scripts, not
runs), its model and its data generator; and the key of what every run shares (the code a run
reaches from :data:`RUN_ENTRY`, and ``conf/``). A scenario's key joins its own to the shared
one: a run records it, and a stored run stands for today's code while its key is today's. The
release digest is one hash of the manifest: information, stamped on what a run, leaderboard
and report was made by. ``results/release.json`` is the manifest as released (``python -m
bugzoo.release``), and a test holds the code to it: a change to what a run computes needs a
new release, in ``CHANGELOG.md``; a change that moves no key needs none.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

from bugzoo import __version__
from bugzoo.bugs import plugins
from bugzoo.errors import UsageError
from bugzoo.models import get_model
from bugzoo.paths import CONF_DIR, SCENARIO_DIR
from bugzoo.provenance import Codebase, code_key, data_digest, key_of
from bugzoo.scenarios import Scenario, get_scenario, load_scenario

RELEASE = "bugzoo-bench " + ".".join(__version__.split(".")[:2])
MANIFEST = Path("results/release.json")
# where a run starts: the code it reaches is the code every run shares
RUN_ENTRY = "bugzoo.harness.runner:execute_and_store"
EXPORT_ONLY = ("reproducers",)  # keyword arguments that make scripts, never runs


def bug_key(bug: str) -> str:
    """The key of a built-in bug's code: its ``BUG`` and all it reaches (a sibling bug whose
    plant it reuses too), less its export deltas (``reproducers=``), which make standalone
    scripts (``bugzoo export``, proven by ``bugzoo task validate``), never runs."""
    return code_key(f"bugzoo.bugs.{bug}:BUG", cut_keywords=EXPORT_ONLY)


@functools.cache
def _module_key(module: str) -> str:
    return code_key(module)


def plugin_bug_key(bug: str) -> str:
    """The key of a plug-in bug's code, as :func:`bug_key` makes a built-in's: its module and
    all it reaches inside its own package, less its export deltas."""
    module = plugins()[bug].module
    origin = Path(importlib.util.find_spec(module).origin)
    depth = module.count(".") + (origin.name == "__init__.py")
    codebase = Codebase(root=origin.parents[depth], package=module.split(".")[0])
    return codebase.key(module, cut_keywords=EXPORT_ONLY)


def scenario_parts(scenario: Scenario, bug: str | None) -> dict:
    """What decides a scenario's runs beside the shared code: the keys of its file, of its bug
    (``bug``, made already) and of its model and data generator."""
    dataset = (scenario.settings.get("defaults") or {}).get("data") or get_model(
        scenario.model).dataset
    return {"config": data_digest(scenario.path), "bug": bug,
            "model": _module_key(f"bugzoo.models.{scenario.model}"),
            "data": _module_key(f"bugzoo.data.{dataset}")}


def manifest() -> dict:
    """The release's manifest: per scenario, the keys of its config, bug, model and data
    generator; the key of the code and configuration every run shares; the digest of it all."""
    scenarios, bugs = {}, {}  # a bug of several scenarios is followed once
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        scenario = load_scenario(path)
        if scenario.bug and scenario.bug not in bugs:
            bugs[scenario.bug] = bug_key(scenario.bug)
        scenarios[scenario.id] = scenario_parts(scenario, bugs.get(scenario.bug))
    shared = key_of(code_key(RUN_ENTRY), data_digest(CONF_DIR))
    body = {"release": RELEASE, "shared": shared, "scenarios": scenarios}
    return {**body, "digest": key_of(body)}


@functools.cache
def live_manifest() -> dict:
    """This checkout's manifest (computed once per process)."""
    return manifest()


def digest() -> str:
    """This checkout's release digest."""
    return live_manifest()["digest"]


def scenario_key(scenario_id: str) -> str | None:
    """One hash of what decides a run of the scenario in this checkout: its config, bug and
    data hashes and the shared code's. A scenario from outside the release (a folder of
    ``--include``, a plug-in's bug) is keyed the same way, its bug's code as its own package
    holds it; None for a run composed without a scenario file. Where two releases give a
    scenario one key, the same code makes its runs, so a result measured under the one stands
    for the other (``bugzoo results validate --changed``, ``bugzoo results traces export
    --keep-unchanged``), and an edit of a plug-in's bug or scenario file makes its stored runs
    stale, as an edit of the catalogue's does."""
    live = live_manifest()
    if scenario_id in live["scenarios"]:
        return key_of(live["shared"], live["scenarios"][scenario_id])
    return _outside_key(scenario_id)


@functools.cache
def _outside_key(scenario_id: str) -> str | None:
    try:
        scenario = get_scenario(scenario_id)
    except UsageError:  # no scenario file: a run composed from its groups
        return None
    bug = None
    if scenario.bug:
        bug = plugin_bug_key(scenario.bug) if scenario.bug in plugins() else bug_key(scenario.bug)
    return key_of(live_manifest()["shared"], scenario_parts(scenario, bug))


def stamp() -> str:
    """``bugzoo-bench 1.0 (digest ...)``: what every run, leaderboard and report carries."""
    return f"{RELEASE} (digest {digest()})"


def write_manifest(path: Path = MANIFEST) -> None:
    """Write this checkout's manifest to ``path``, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(manifest(), indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def main() -> int:
    write_manifest()
    print(f"wrote {MANIFEST}: {stamp()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
