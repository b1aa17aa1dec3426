"""Hydra composition: conf/ building blocks plus scenarios/ registered as the ``scenario`` group.

Scenarios (:mod:`bugzoo.scenarios`, the built-in folder and any included one) go into Hydra's
ConfigStore (group ``scenario``, package ``_global_``) instead of onto the search path, because
a search-path group breaks ``-m 'scenario=glob(*)'`` in hydra-core 1.3 (Hydra issue #1942).
The ``bug`` and ``detector`` groups are made from their registries the same way: a bug's node
(its id, onset and params, from its module) as ``bug/<id>`` (a plug-in's ``namespace/name`` as
``bug/<namespace>/<name>``, so ``bug=mylab/label_noise`` and ``override /bug: mylab/label_noise``
select it as a file would), and each registered detector as ``detector/<name>`` with no
parameters, so that ``detector=[a,b]`` selects them.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import sys
from collections import OrderedDict
from collections.abc import Collection
from pathlib import Path

import hydra
import omegaconf
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob, Override, OverrideType
from hydra.core.plugins import Plugins
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from bugzoo.bugs import bug_config, bug_ids, check_applies, get_bug
from bugzoo.detector_registry import DETECTORS
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.models import MODELS, model_config
from bugzoo.paths import CONF_DIR, cache_folder
from bugzoo.scenarios import Scenario, get_scenario, list_scenarios, missing_cuda


def group_choices(group: str) -> list[str]:
    """The choices of a config group: a registry's names for the groups made from one
    (``model``, ``bug``, ``detector``), the files of conf/<group>/ for the rest."""
    made = {"model": MODELS.names, "bug": bug_ids, "detector": DETECTORS.names}
    if group in made:
        return made[group]()
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def register_scenarios(chosen: list[Scenario]) -> None:
    """Put scenarios into Hydra's ConfigStore as group ``scenario``: a multirun all of them, a
    single compose only the one it needs (Hydra deep-copies the whole store on every compose,
    and carrying every scenario there costs a single compose most of its time)."""
    store = ConfigStore.instance()
    store.repo.pop("scenario", None)
    for scenario in chosen:
        store.store(group="scenario", name=scenario.id, node=scenario.node, package="_global_")


def register_bugs(chosen: Collection[str]) -> None:
    """Put the ``chosen`` bugs' nodes into Hydra's ConfigStore (group ``bug``, or
    ``bug/<namespace>`` for a plug-in), and no other bug's."""
    store = ConfigStore.instance()
    store.repo.pop("bug", None)
    for bug_id in chosen:
        group, _, name = f"bug/{bug_id}".rpartition("/")
        store.store(group=group, name=name, node=bug_config(bug_id), package="bug")


def register_groups(bugs: Collection[str] | None = None) -> None:
    """Put the ``model``, ``bug`` and ``detector`` groups, made from their registries, into
    Hydra's ConfigStore (scenarios: :func:`register_scenarios`). Making their nodes costs a
    fifth of a compose, so it is done again only when a node changed since the last time (a
    plug-in installed, a bug's parameters edited) or the store lost a group; a composition read
    back from what is kept needs none of it. With ``bugs``, the ``bug`` group holds only
    theirs: a single composition selects at most its scenario's bug and a ``bug=`` override's,
    and Hydra deep-copies the whole store on every compose (every bug's node was most of it)."""
    nodes = registry_nodes()
    repo = ConfigStore.instance().repo
    if _registered.get("nodes") != nodes or not {"model", "detector"} <= set(repo):
        register_models()
        register_detectors()
        _registered.update(nodes=nodes, bugs=None)
    wanted = tuple(sorted(bug_ids() if bugs is None else bugs))
    if _registered.get("bugs") != wanted or "bug" not in repo:
        register_bugs(wanted)
        _registered["bugs"] = wanted


_registered: dict[str, object] = {}  # what register_groups last put into the ConfigStore
REGISTRY_GROUPS = ("model", "bug", "detector", "scenario")  # the groups bugzoo puts in the store


def registry_nodes() -> str:
    """What the groups made from the registries hold: every model's and bug's node, and the
    detectors' names."""
    return repr(([(m, model_config(m)) for m in MODELS.names()],
                 [(b, bug_config(b)) for b in bug_ids()], DETECTORS.names()))


def register_models() -> None:
    """Put every model's node into Hydra's ConfigStore (group ``model``)."""
    store = ConfigStore.instance()
    store.repo.pop("model", None)
    for name in MODELS.names():
        store.store(group="model", name=name, node=model_config(name))


def register_detectors() -> None:
    """Put every registered detector into Hydra's ConfigStore (group ``detector``), without
    parameters: ``detector=[a,b]`` selects them, ``+detector.a.window=5`` sets one."""
    store = ConfigStore.instance()
    store.repo.pop("detector", None)
    for name in DETECTORS.names():
        store.store(group="detector", name=name, node={name: {}}, package="detector")


def validate_overrides(overrides: list[str]) -> None:
    """Check group choices before Hydra sees them, so mistakes get a "did you mean"."""
    checked = ("model", "data", "bug", "harness", "optim", "scenario")
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.lstrip("+~")
        if key == "detector" and sep:  # detector=[a,b]: a multi-select list of the registry's
            for name in filter(None, value.strip("[]").split(",")):
                if name not in group_choices("detector"):
                    raise unknown_choice("detector", name, group_choices("detector"))
            continue
        if not sep or key not in checked or value in ("null", "") or "(" in value or "," in value:
            continue
        choices = [s.id for s in list_scenarios()] if key == "scenario" else group_choices(key)
        if value not in choices:
            raise unknown_choice(key, value, choices)


def compose_run(overrides: list[str] | tuple[str, ...] = (),
                scenario: Scenario | None = None) -> DictConfig:
    """Compose the run config from conf/, scenarios/ and command-line style overrides; with
    ``scenario``, that spec (as a sweep's task carries it) is composed under the overrides,
    without looking it up again."""
    overrides = list(overrides)
    validate_overrides(overrides)
    if scenario is not None:
        chosen = [scenario]
        overrides = [f"scenario={scenario.id}", *overrides]
    else:
        chosen = [get_scenario(v) for k, _, v in (o.partition("=") for o in overrides)
                  if k.lstrip("+") == "scenario"]
    register_scenarios(chosen)
    cfg = _with_values(overrides, chosen)
    if cfg is None:
        cfg = _hydra_compose(overrides, _chosen_bugs(overrides, chosen))
    check_run_config(cfg)
    return cfg


def _hydra_compose(overrides: list[str], bugs: Collection[str] | None = None) -> DictConfig:
    """Hydra's composition of ``overrides``, with only ``bugs`` in the ``bug`` group when
    given (:func:`register_groups`); should it fail with them, it is tried again with every
    bug's node, so that an error is Hydra's own about the whole catalogue."""
    register_groups(bugs)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose("config", overrides=overrides)
    except HydraException as e:  # override syntax, unknown keys: one line, not a traceback
        if bugs is not None:
            return _hydra_compose(overrides)
        raise UsageError(_hydra_message(e)) from None


def multirun_choices(overrides: list[str]) -> tuple[list[Scenario], set[str] | None]:
    """The scenarios and bugs a multirun of ``overrides`` can select: those its ``scenario=``
    and ``bug=`` overrides name, list or glob, with the chosen scenarios' bugs. Hydra deep-copies
    the whole ConfigStore for every job it composes, so a sweep's store holds only these.
    Where the overrides could reach others (a name not in the catalogue, a sweep set in
    ``hydra.sweeper``, a range, a package), it is every scenario and every bug (None), so that
    what Hydra selects or says is its own."""
    every = (list_scenarios(), None)
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return every
    if any(o.key_or_group.startswith("hydra.sweeper") for o in parsed):
        return every
    known = {"scenario": {s.id: s for s in every[0]}, "bug": dict.fromkeys(bug_ids())}
    names: dict[str, set[str]] = {"scenario": set(), "bug": set()}
    for override in parsed:
        group = override.key_or_group
        if group not in names or override.is_delete():
            continue
        chosen = _override_names(override, sorted(known[group]))
        if chosen is None or not chosen <= known[group].keys():
            return every
        names[group] |= chosen
    scenarios = [known["scenario"][s] for s in sorted(names["scenario"])]
    return scenarios, names["bug"] | {s.bug for s in scenarios if s.bug}


def _override_names(override: Override, choices: list[str]) -> set[str] | None:
    """The names one override of a group selects: its value, its list, its glob over
    ``choices``; None for anything else (a range, an interval, a package)."""
    value = override.value()
    if override.package is not None or override.is_range_sweep() or override.is_interval_sweep():
        return None
    if isinstance(value, Glob):
        return set(value.filter(choices))
    if override.is_choice_sweep():
        return set(override.sweep_string_iterator())
    return set() if value is None else {value} if isinstance(value, str) else None


def _chosen_bugs(overrides: list[str], chosen: list[Scenario]) -> set[str]:
    """The bugs a single composition of ``overrides`` over the ``chosen`` scenarios can select:
    theirs and a ``bug=`` override's."""
    named = {value for key, _, value in (o.partition("=") for o in overrides)
             if key.lstrip("+") == "bug" and value not in ("", "null")}
    return named | {s.bug for s in chosen if s.bug}


# Compositions of the overrides that choose configs (groups, additions, deletions), by those
# overrides, what the chosen scenarios and registries put in the store, and the conf/ files. A
# run that only changes values (seed=3 harness.steps=20) is that composition with its values set
# the way Hydra sets them, after composing (OmegaConf.update, merging, in struct mode), so a
# sweep's runs of one scenario compose once. Anything else, and any error, goes through Hydra
# itself. They are kept pickled: bytes hold no objects that a walk of what a run's process can
# reach (bugzoo.judge.bugcheck.plant_evidence) would have to go through. They are also kept on
# disk (cache_folder("compositions")), so that the next process, a sweep's other worker or the
# next sweep, does not compose a scenario again: a Hydra compose takes a tenth of a second or
# more, as long as a short run. The key on disk adds what else a composition depends on: Hydra's
# plug-ins and every other name in its ConfigStore, the conf/ folder, and the Hydra, OmegaConf
# and Python that composed it.
_composed: OrderedDict[tuple, bytes] = OrderedDict()
COMPOSED_KEPT = 256
COMPOSED_ON_DISK = 4096  # past this many files, the oldest quarter is deleted


def _with_values(overrides: list[str], chosen: list[Scenario]) -> DictConfig | None:
    """The config of ``overrides`` from a kept composition, or None where Hydra must compose
    it (the composition is then kept for the next time)."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return None  # Hydra says what is wrong with it
    groups = ({p.name for p in CONF_DIR.iterdir() if p.is_dir()} | set(REGISTRY_GROUPS)
              | set(ConfigStore.instance().repo))
    values = [o for o in parsed if o.type == OverrideType.CHANGE and o.package is None
              and not o.is_sweep_override() and "/" not in o.key_or_group
              and o.key_or_group not in groups and o.key_or_group.split(".")[0] != "hydra"]
    choosing = [o.input_line for o in parsed if o not in values]
    key = (tuple(choosing), repr([s.node for s in chosen]), registry_nodes(), _conf_files())
    if key not in _composed:
        path = _disk_path(key)
        _composed[key] = (_composed_on_disk(path)
                          or _compose_and_keep(path, choosing, _chosen_bugs(choosing, chosen)))
        while len(_composed) > COMPOSED_KEPT:
            _composed.popitem(last=False)
    _composed.move_to_end(key)
    cfg = pickle.loads(_composed[key])
    try:
        for override in values:
            OmegaConf.update(cfg, override.key_or_group, override.value(), merge=True)
    except Exception:  # e.g. an unknown key: Hydra's own message
        return None
    return cfg


def _conf_files() -> tuple[tuple[str, int, int], ...]:
    """Each conf/ file's name, size and modification time: a composition is not reused once a
    file is edited, added or deleted."""
    return tuple((str(path.relative_to(CONF_DIR)), stat.st_size, stat.st_mtime_ns)
                 for path in sorted(CONF_DIR.rglob("*.yaml")) for stat in [path.stat()])


def _store_names(repo: dict) -> list:
    """The names in (a group of) Hydra's ConfigStore, nested as its groups are, but for the
    groups made from bugzoo's registries (the key holds those)."""
    return sorted((name, _store_names(node) if isinstance(node, dict) else None)
                  for name, node in repo.items() if name not in REGISTRY_GROUPS)


def _disk_path(key: tuple) -> Path | None:
    """Where the composition of ``key`` is kept on disk, or None with the cache off."""
    folder = cache_folder("compositions")
    if folder is None:
        return None
    # Hydra's plug-ins (a search path plug-in adds config folders) put their nodes in the store
    # when first looked for
    plugins = sorted(f"{p.__module__}.{p.__name__}" for p in Plugins.instance().discover())
    depends = repr((key, str(CONF_DIR), plugins, _store_names(ConfigStore.instance().repo),
                    hydra.__version__, omegaconf.__version__, sys.version))
    return folder / f"{hashlib.sha256(depends.encode()).hexdigest()[:32]}.pkl"


def _composed_on_disk(path: Path | None) -> bytes | None:
    """The composition a process kept at ``path``, or None (none kept, or unreadable)."""
    if path is None:
        return None
    try:
        data = path.read_bytes()
        pickle.loads(data)
    except Exception:  # absent, or not a whole pickle (a disk that filled up): compose again
        return None
    return data


def _compose_and_keep(path: Path | None, choosing: list[str], bugs: set[str]) -> bytes:
    """Compose ``choosing`` with Hydra (``bugs`` in the store) and keep the composition at
    ``path``; a cache that cannot be written is skipped."""
    data = pickle.dumps(_hydra_compose(choosing, bugs))
    if path is None:
        return data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(data)
        partial.replace(path)
        kept = sorted(path.parent.glob("*.pkl"), key=lambda p: p.stat().st_mtime_ns)
        if len(kept) > COMPOSED_ON_DISK:
            for old in kept[:COMPOSED_ON_DISK // 4]:
                old.unlink(missing_ok=True)
    except OSError:
        pass
    return data


def _hydra_message(error: HydraException) -> str:
    """Hydra's error as one line; an unknown key also lists the valid keys next to it."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    unknown = re.match(r"Could not override '([\w.]+)'", first)
    if unknown:
        parent, _, _ = unknown.group(1).rpartition(".")
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            node = compose("config")
        node = OmegaConf.select(node, parent) if parent else node
        if isinstance(node, DictConfig):
            return str(unknown_choice("setting", unknown.group(1),
                                      [f"{parent}.{k}" if parent else k for k in node]))
    return f"bad override: {first}"


def check_run_config(cfg: DictConfig) -> None:
    """Reject settings no run can use, and bugs planted in models they do not apply to."""
    h = cfg.harness
    for key in ("steps", "eval_interval", "batch_size", "eval_batch_size", "threads"):
        value = h[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"harness.{key} must be a positive integer, got {value!r}")
    if h.steps > 1_000_000:
        raise UsageError(f"harness.steps={h.steps} is absurd (at most 1000000)")
    if not isinstance(cfg.seed, int) or isinstance(cfg.seed, bool) or not 0 <= cfg.seed < 2**32:
        raise UsageError(f"seed must be an integer in [0, 2**32), got {cfg.seed!r}")
    for key in ("lr", "eps", "weight_decay"):
        value = cfg.optim.get(key)
        bad = not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0
        if value is not None and bad:
            raise UsageError(f"optim.{key} must be a non-negative number, got {value!r}")
    smoothing = cfg.loss.label_smoothing
    if not isinstance(smoothing, int | float) or isinstance(smoothing, bool) \
            or not 0 <= smoothing < 1:
        raise UsageError(f"loss.label_smoothing must be a number in [0, 1), got {smoothing!r}")
    if not isinstance(h.get("deterministic", False), bool):
        raise UsageError(f"harness.deterministic must be true or false, got {h.deterministic!r}")
    if h.precision not in ("fp32", "fp16", "bf16"):
        raise unknown_choice("harness.precision", h.precision, ["fp32", "fp16", "bf16"])
    if h.device not in ("auto", "cpu", "cuda") and not str(h.device).startswith("cuda:"):
        raise unknown_choice("harness.device", h.device, ["auto", "cpu", "cuda"])
    if cfg.get("bug") is not None:
        bug = get_bug(cfg.bug.id)
        check_applies(bug, cfg.model.name)
        onset = cfg.bug.onset
        if not isinstance(onset, int) or isinstance(onset, bool) or not 0 <= onset:
            unset = (f" (bug '{bug.id}' takes it from the setting {bug.onset[2:-1]}, which is "
                     "not set)" if onset is None and isinstance(bug.onset, str) else "")
            raise UsageError(f"bug.onset must be a step number (0 or more), got {onset!r}"
                             + unset)
        if onset and not bug.honours_onset:
            raise UsageError(f"bug '{bug.id}' cannot start mid-run, it is planted when the run "
                             f"is built (bug.onset must be 0, got {onset})")
        if missing_cuda(bug.id, str(h.device)):
            raise UsageError(f"bug '{bug.id}' requires CUDA and this run has no CUDA device "
                             f"(harness.device={h.device}): skipped")


def resolved(cfg: DictConfig) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)
