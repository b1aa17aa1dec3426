"""Scenarios: one model, one bug (or none) and the run settings they need, one YAML file each.

A scenario file is a small delta over ``conf/`` (README, "Adding a bug or a scenario")::

    scenario: mlp-init_too_large
    defaults:
      - override /model: mlp
      - override /bug: init_too_large
    model: {params: {depth: 8}}

Files are parsed once into :class:`Scenario` objects. Every other module reads scenarios through
:func:`get_scenario` and :func:`list_scenarios`; none splits ids or walks ``defaults:``.

Every buggy scenario has a matched **control**: the clean scenario with the same model and the
same settings (here ``mlp-clean-depth8``). Controls are scenario files like any other, so they
can be run, listed and swept by name; clean scenarios that control no bug are the **healthy
variants** (other learning rates, batch sizes, schedules, ...), which the benchmark uses to
count false alarms.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from bugzoo.bugs import bug_ids, flat_id, get_bug
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.paths import CONF_DIR, SCENARIO_DIR, included_folders

# keys of a scenario file that describe the scenario instead of setting how the run trains
DESCRIPTIVE_KEYS = ("scenario", "description", "excluded", "unproven", "defaults", "bug")


@dataclass(frozen=True)
class Scenario:
    """One scenario, parsed from ``scenarios/<id>.yaml``.

    ``settings`` holds the run settings the file changes (``harness``, ``optim``, ``data``,
    ``model`` params, other config-group choices); ``bug_config`` the file's own ``bug:`` block
    (an onset or params overriding the bug's own). ``control`` is the id of the clean
    scenario with the same model and settings (``None`` for a clean scenario, or when no such
    file exists). Both dicts are read-only by convention.
    """

    id: str
    model: str
    bug: str | None
    settings: dict = field(compare=False, repr=False)
    bug_config: dict = field(compare=False, repr=False)
    excluded: str | None
    # why the bug's symptom is not proven in this setting (what validity measured), if it is not
    unproven: str | None
    description: str
    control: str | None
    path: Path = field(compare=False, repr=False)
    node: dict = field(compare=False, repr=False)  # the parsed file, as Hydra composes it

    @property
    def clean(self) -> bool:
        """No bug planted: a control or a healthy variant."""
        return self.bug is None

    @property
    def world_size(self) -> int:
        return int((self.settings.get("harness") or {}).get("world_size", 1))

    @property
    def needs_cuda(self) -> bool:
        return self.bug is not None and get_bug(self.bug).needs_cuda

    @property
    def isolate(self) -> bool:
        """Whether a sweep must run it in a process of its own: several ranks, or a bug that
        crashes, hangs or needs ``torch.distributed``."""
        if self.world_size > 1:
            return True
        bug = get_bug(self.bug) if self.bug else None
        return bool(bug and (bug.loud or bug.category == "distributed"
                             or "distributed" in bug.requires))

    def skip_reason(self, device: str = "auto", include_excluded: bool = False) -> str | None:
        """Why a sweep leaves this scenario out on ``device``, or ``None`` to run it."""
        if self.excluded and not include_excluded:
            return f"excluded ({self.excluded})"
        return missing_cuda(self.bug, device)


def missing_cuda(bug_id: str | None, device: str) -> str | None:
    """Why a run planting ``bug_id`` cannot run on ``device`` (the bug needs CUDA), or None."""
    if bug_id and get_bug(bug_id).needs_cuda and not uses_cuda(device):
        return f"needs CUDA and this run has no CUDA device (harness.device={device})"
    return None


def uses_cuda(device: str) -> bool:
    """Whether a run on ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:1``) would use CUDA."""
    if str(device).startswith("cuda"):
        return True
    if device != "auto":
        return False
    import torch  # here, not at the top: listing scenarios must not pay for torch

    return torch.cuda.is_available()


def _fail(path: Path, problem: str, key: str | None = None) -> UsageError:
    """A malformed file: its path, the line of its top-level ``key`` (else line 1), what is
    wrong."""
    return UsageError(f"malformed scenario file {path} line {_line_of(path, key)}: {problem}")


def _line_of(path: Path, key: str | None) -> int:
    """The line of a top-level key of a scenario file that parses (1 when it is not there)."""
    node = yaml.compose(path.read_text())
    if key and isinstance(node, yaml.MappingNode):
        for name, _ in node.value:
            if name.value == key:
                return name.start_mark.line + 1
    return 1


def _parse(path: Path) -> dict:
    """The YAML mapping of one scenario file; a malformed file names itself and the line."""
    try:
        node = safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).strip().splitlines()[0]
        raise UsageError(f"malformed scenario file {path}{where}: {problem}") from None
    if not isinstance(node, dict) or node.get("scenario") != path.stem:
        raise _fail(path, f"it must be a mapping with 'scenario: {path.stem}'", "scenario")
    return node


def _choices(path: Path, node: dict) -> dict[str, str]:
    """The config-group choices of a file's ``defaults:`` list (``override /model: mlp``)."""
    entries = node.get("defaults") or []
    if not isinstance(entries, list):
        raise _fail(path, "'defaults' must be a list of 'override /<group>: <choice>' entries",
                    "defaults")
    chosen = {}
    for entry in entries:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise _fail(path, f"defaults entry {entry!r} is not 'override /<group>: <choice>'",
                        "defaults")
        (key, value), = entry.items()
        chosen[key.split("/")[-1].strip()] = value
    return chosen


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with libyaml's parser where PyYAML has it (the same objects, about ten
    times sooner: a process reads every scenario file once)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@cache
def _load_yaml(path: Path) -> dict:
    return safe_load(path.read_text()) or {}


def _default_choice(group: str) -> str:
    """The choice ``conf/config.yaml`` makes for a config group when a scenario names none."""
    defaults = _load_yaml(CONF_DIR / "config.yaml")["defaults"]
    return next(e[group] for e in defaults if isinstance(e, dict) and group in e)


def load_scenario(path: Path) -> Scenario:
    """Parse one scenario file (its control is filled in by the registry)."""
    node = _parse(path)
    chosen = _choices(path, node)
    model = chosen.pop("model", None) or _default_choice("model")
    bug = chosen.pop("bug", None)
    bug_config = node.get("bug") or {}
    if not isinstance(bug_config, dict):
        raise _fail(path, "'bug' must be a mapping (onset, params)", "bug")
    settings = {k: v for k, v in node.items() if k not in DESCRIPTIVE_KEYS}
    if chosen:
        settings["defaults"] = chosen
    excluded, unproven = node.get("excluded"), node.get("unproven")
    if unproven and not bug:
        raise _fail(path, "only a buggy scenario can be 'unproven'", "unproven")
    return Scenario(id=path.stem, model=model, bug=bug, settings=settings,
                    bug_config=bug_config, excluded=str(excluded) if excluded else None,
                    unproven=str(unproven) if unproven else None,
                    description=str(node.get("description") or ""), control=None, path=path,
                    node=node)


def _frozen(value: Any) -> Any:
    """A hashable, order-free copy of nested settings, to compare two scenarios' settings."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def settings_key(scenario: Scenario) -> tuple:
    """What a control must share with its buggy scenario: the model and every setting."""
    return scenario.model, _frozen(scenario.settings)


def scenario_id(model: str, bug: str | None) -> str:
    """The id of a run composed without a scenario: ``<model>-<bug>`` (a plug-in bug's
    ``namespace/name`` as ``namespace--name``) or ``<model>-clean``."""
    return f"{model}-{flat_id(bug) if bug else 'clean'}"


def registry() -> dict[str, Scenario]:
    """Every scenario by id, sorted, each buggy one with its control filled in: the built-in
    folder's and those of the folders on ``BUGZOO_SCENARIO_PATH`` (``--include DIR``)."""
    return _registry_of((SCENARIO_DIR, *included_folders()))


@cache
def _registry_of(folders: tuple[Path, ...]) -> dict[str, Scenario]:
    paths: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")):
            if paths.get(path.stem, path).resolve() != path.resolve():
                raise UsageError(f"duplicate scenario id '{path.stem}': {paths[path.stem]} "
                                 f"and {path}")
            paths[path.stem] = path
    found = {sid: load_scenario(p) for sid, p in sorted(paths.items())}
    known_bugs = set(bug_ids())
    controls: dict[tuple, str] = {}
    for s in found.values():  # ids sorted: `mlp-clean` comes before `mlp-clean-<variant>`
        if s.clean:
            controls.setdefault(settings_key(s), s.id)
        elif s.bug not in known_bugs:
            raise _fail(s.path, str(unknown_choice("bug", s.bug, known_bugs)), "defaults")
    for s in found.values():
        if not s.clean and settings_key(s) not in controls:
            raise _fail(s.path, f"buggy scenario {s.id} has no matched control: add a clean "
                        "scenario with its model and the same settings (every buggy run is "
                        "judged against one)", "scenario")
    return {sid: s if s.clean else replace(s, control=controls[settings_key(s)])
            for sid, s in found.items()}


registry.cache_clear = _registry_of.cache_clear  # what a caller that edits a folder resets


def default_scenario(model: str) -> Scenario:
    """The clean scenario of ``model`` on its default settings (``<model>-clean``)."""
    return next(s for s in registry().values() if s.clean and s.model == model
                and not s.settings)


def get_scenario(scenario_id: str) -> Scenario:
    """The scenario with this id; an unknown id raises a UsageError with a "did you mean"."""
    found = registry()
    if scenario_id not in found:
        raise unknown_choice("scenario", scenario_id, found)
    return found[scenario_id]


def list_scenarios(patterns: str | Iterable[str] | None = None) -> list[Scenario]:
    """Every scenario sorted by id; with ``patterns`` (ids or globs such as ``mlp-*``), those
    matching any of them. A pattern that matches nothing is a UsageError naming it."""
    found = registry()
    if patterns is None:
        return list(found.values())
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(sid, pattern) for sid in found):
            if not any(c in pattern for c in "*?["):
                raise unknown_choice("scenario", pattern, found)
            raise UsageError(f"no scenario matches '{pattern}' (`bugzoo list scenarios` lists "
                             f"all {len(found)})")
    return [s for sid, s in found.items()
            if any(fnmatch.fnmatchcase(sid, p) for p in patterns)]
