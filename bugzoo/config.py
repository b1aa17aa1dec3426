"""Hydra composition: conf/ building blocks plus scenarios/ registered as the ``scenario`` group.

Scenarios (:mod:`bugzoo.scenarios`, the built-in folder and any included one) go into Hydra's
ConfigStore (group ``scenario``, package ``_global_``) instead of onto the search path, because
a search-path group breaks ``-m 'scenario=glob(*)'`` in hydra-core 1.3 (Hydra issue #1942).
Plug-in bugs have no ``conf/bug/<id>.yaml``: their node goes into the ConfigStore as
``bug/<namespace>/<name>``, so ``bug=mylab/label_noise`` and ``override /bug: mylab/label_noise``
select it as a file would.
"""

from __future__ import annotations

import re

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from bugzoo.bugs import bug_config, bug_ids, check_applies, get_bug, plugins
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.paths import CONF_DIR
from bugzoo.scenarios import get_scenario, list_scenarios, missing_cuda


def group_choices(group: str) -> list[str]:
    """Config names available in a conf/ group (``model``, ``data``, ``bug``, ...)."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def register_scenarios(names: list[str] | None = None) -> None:
    """Put scenarios (all, or just ``names``) into Hydra's ConfigStore as group ``scenario``.

    Hydra deep-copies the whole store on every compose, so a single compose registers only the
    scenario it needs (about 10x faster than carrying all of them); multirun registers all.
    """
    store = ConfigStore.instance()
    store.repo.pop("scenario", None)
    chosen = list_scenarios() if names is None else [get_scenario(n) for n in names]
    for scenario in chosen:
        store.store(group="scenario", name=scenario.id, node=scenario.node, package="_global_")


def register_bugs() -> None:
    """Put every plug-in bug's node into Hydra's ConfigStore (group ``bug/<namespace>``)."""
    store = ConfigStore.instance()
    store.repo.pop("bug", None)  # the built-ins are files; only plug-ins live here
    for bug_id in plugins():
        namespace, name = bug_id.split("/")
        store.store(group=f"bug/{namespace}", name=name, node=bug_config(bug_id), package="bug")


def validate_overrides(overrides: list[str]) -> None:
    """Check group choices before Hydra sees them, so mistakes get a "did you mean"."""
    choices = {"model": group_choices("model"), "data": group_choices("data"),
               "bug": bug_ids(), "harness": group_choices("harness"),
               "optim": group_choices("optim"), "scenario": [s.id for s in list_scenarios()]}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.lstrip("+~")
        if key == "detector" and sep:  # detector=[a,b]: a multi-select list of conf/detector
            for name in filter(None, value.strip("[]").split(",")):
                if name not in group_choices("detector"):
                    raise unknown_choice("detector", name, group_choices("detector"))
            continue
        if not sep or key not in choices or value in ("null", "") or "(" in value or "," in value:
            continue
        if value not in choices[key]:
            raise unknown_choice(key, value, choices[key])


def compose_run(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """Compose the run config from conf/, scenarios/ and command-line style overrides."""
    overrides = list(overrides)
    validate_overrides(overrides)
    register_bugs()
    register_scenarios([v for k, _, v in (o.partition("=") for o in overrides)
                        if k.lstrip("+") == "scenario"])
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
    except HydraException as e:  # override syntax, unknown keys: one line, not a traceback
        raise UsageError(_hydra_message(e)) from None
    check_run_config(cfg)
    return cfg


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
            unset = (f" (conf/bug/{bug.id}.yaml takes it from a setting that is not set)"
                     if onset is None else "")
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
