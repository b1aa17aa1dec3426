"""The benchmark release: ``bugzoo-bench 1.6``, frozen and stamped.

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
import re
import sys
from pathlib import Path

from bugzoo.models import get_model
from bugzoo.paths import CONF_DIR, PACKAGE, SCENARIO_DIR
from bugzoo.scenarios import load_scenario

RELEASE = "bugzoo-bench 1.6"
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


# 1.2's manifest hashed these bugs with their ``reproducers=`` cut alone: its comma left on a
# line of its own, their import of ``Delta`` kept. They keep that cut: another would move their
# hashes, and so their release keys, and rerun their scenarios for no change of code.
CUT_AS_IN_1_2 = frozenset({
    "batch_collapsed", "batch_size_positional", "class_filtered_out", "debug_subset_left_on",
    "double_softmax", "dying_relu_bias", "early_stop_best_zero", "eval_on_train",
    "frozen_from_start", "functional_dropout_in_eval", "head_width_hardcoded", "init_too_large",
    "labels_misaligned", "leakage_val_in_train", "log_of_zero", "lr_too_high",
    "missing_activation", "missing_zero_grad", "mse_for_classification", "narrow_bottleneck",
    "nll_on_logits", "no_shuffle_sorted", "reinit_every_epoch", "resume_missing_checkpoint",
    "resume_without_optimizer_state", "scheduler_never_stepped", "sgd_with_adam_lr",
    "shuffle_after_batching", "sigmoid_hidden", "softmax_wrong_dim", "too_few_epochs",
    "train_mode_not_restored",
})


def without_export_deltas(path: Path) -> bytes:
    """A bug module's bytes less its export deltas (every ``reproducers=`` argument): a delta
    makes a standalone script (``bugzoo export``, proven by ``bugzoo task validate``), never a
    run, so writing one needs no new release. A delta on lines of its own, ending with its
    comma, is cut with those lines, and the import of ``Delta`` with it, so a bug's first
    delta leaves its hash as it was. An import of ``SetupDelta`` on a line of its own is cut
    from every bug, those of ``CUT_AS_IN_1_2`` too."""
    source = path.read_bytes()
    starts = [0, *(newline.end() for newline in re.finditer(b"\n", source))]
    tree = ast.parse(source)
    cuts = sorted((starts[kw.lineno - 1] + kw.col_offset,
                   starts[kw.end_lineno - 1] + kw.end_col_offset)
                  for node in ast.walk(tree) if isinstance(node, ast.Call)
                  for kw in node.keywords if kw.arg == "reproducers")
    if path.stem not in CUT_AS_IN_1_2:
        cuts = [*(_with_its_lines(source, start, end) for start, end in cuts),
                *_delta_import(tree, starts)]
    cuts = sorted([*cuts, *_setup_delta_imports(tree, starts)])
    kept, at = [], 0
    for start, end in cuts:
        kept.append(source[at:start])
        at = end
    return b"".join([*kept, source[at:]])


def _with_its_lines(source: bytes, start: int, end: int) -> tuple[int, int]:
    """The span of a keyword argument widened to its whole lines and the comma that ends it,
    where nothing else shares them."""
    line_start = source.rfind(b"\n", 0, start) + 1
    ending = re.match(rb",[ \t]*\n", source[end:])
    if source[line_start:start].strip() or not ending:
        return start, end
    return line_start, end + ending.end()


def _delta_import(tree: ast.Module, starts: list[int]) -> list[tuple[int, int]]:
    """The span of ``Delta`` in the module's ``from bugzoo.bugs[.base] import ...``, with the
    separator that joins it to the next name (to the previous one when it is last), or the
    whole statement when it imports ``Delta`` alone."""
    imports = [node for node in tree.body
               if isinstance(node, ast.ImportFrom)
               and node.module in ("bugzoo.bugs.base", "bugzoo.bugs")
               and any(alias.name == "Delta" for alias in node.names)]
    if not imports:
        return []
    if len(imports[0].names) == 1:  # the whole statement, with its line
        return [(starts[imports[0].lineno - 1], starts[imports[0].end_lineno])]
    names = imports[0].names
    at = next(i for i, alias in enumerate(names) if alias.name == "Delta")
    delta = names[at]
    if at + 1 < len(names):  # "Delta, " up to the next name
        after = names[at + 1]
        return [(starts[delta.lineno - 1] + delta.col_offset,
                 starts[after.lineno - 1] + after.col_offset)]
    before = names[at - 1]  # ", Delta" from the name before
    return [(starts[before.end_lineno - 1] + before.end_col_offset,
             starts[delta.end_lineno - 1] + delta.end_col_offset)]


def _setup_delta_imports(tree: ast.Module, starts: list[int]) -> list[tuple[int, int]]:
    """The spans of the statements that import ``SetupDelta`` alone, each with its line."""
    return [(starts[node.lineno - 1], starts[node.end_lineno])
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module == "bugzoo.bugs"
            and [alias.name for alias in node.names] == ["SetupDelta"]]


def bug_hash(path: Path) -> str:
    """The hash of a bug's code: its module without its export deltas, then each sibling bug
    module it builds on (``init_too_small`` plants ``init_too_large``'s class), so that a change
    there moves the bug's key too."""
    h = hashlib.sha256(without_export_deltas(path))
    for sibling in sibling_bugs(path):
        h.update(without_export_deltas(sibling))
    return h.hexdigest()[:16]


def sibling_bugs(path: Path, seen: frozenset[str] = frozenset()) -> list[Path]:
    """The bug modules (``bugzoo/bugs/<id>.py``) that the module at ``path`` imports, and
    theirs, in the order they are first met; not ``base``, the bug machinery, which is
    ``SHARED``, nor the export deltas' ``setup_delta``."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith("bugzoo.bugs.")):
            continue
        name = node.module.removeprefix("bugzoo.bugs.")
        sibling = PACKAGE / "bugs" / f"{name}.py"
        if name in ("base", "setup_delta") or name in seen or not sibling.is_file():
            continue
        seen = seen | {name}
        found += [sibling, *sibling_bugs(sibling, seen)]
    return found


def manifest() -> dict:
    """The release's manifest: per scenario, the hashes of its config, bug code and data
    generator; the hash of the shared code; the digest of all of it."""
    scenarios, bug_hashes = {}, {}  # a bug of several scenarios is hashed once
    for path in sorted(SCENARIO_DIR.glob("*.yaml")):
        scenario = load_scenario(path)
        dataset = (scenario.settings.get("defaults") or {}).get("data") or get_model(
            scenario.model).dataset
        if scenario.bug and scenario.bug not in bug_hashes:
            bug_hashes[scenario.bug] = bug_hash(PACKAGE / "bugs" / f"{scenario.bug}.py")
        scenarios[scenario.id] = {
            "config": file_hash(path),
            "bug": bug_hashes.get(scenario.bug),
            "data": file_hash(PACKAGE / "data" / f"{dataset}.py"),
        }
    shared = file_hash(*(PACKAGE / p for p in SHARED), CONF_DIR)
    body = {"release": RELEASE, "shared": shared, "scenarios": scenarios}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return {**body, "digest": digest}


@functools.cache
def live_manifest() -> dict:
    """This checkout's manifest (computed once per process)."""
    return manifest()


def digest() -> str:
    """This checkout's release digest."""
    return live_manifest()["digest"]


def key_of(*parts: object) -> str:
    """One short hash of JSON-able ``parts``."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def scenario_key(scenario_id: str) -> str | None:
    """One hash of what decides a run of the scenario in this checkout: its config, bug and
    data hashes and the shared code's; None for a scenario outside the release (a plug-in's,
    whose code is not hashed). Where two releases give a scenario one key, the same code makes
    its runs, so a result measured under the one stands for the other (``bugzoo validate
    --changed``, ``bugzoo traces export --keep-unchanged``)."""
    live = live_manifest()
    if scenario_id not in live["scenarios"]:
        return None
    return key_of(live["shared"], live["scenarios"][scenario_id])


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
