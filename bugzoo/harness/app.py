"""``bugzoo run``: the Hydra application that trains one run (or a ``-m`` sweep of runs).

Each job composes conf/ + scenario + overrides, trains with the selected detectors watching,
and writes its folder under ``<harness.out_dir>/<harness.sweep>/<scenario>/seed<k>/``, whichever
Hydra launcher runs it (basic, joblib, submitit). In a ``-m`` sweep, scenarios this machine cannot
run (CUDA-only without CUDA) or marked ``excluded`` are skipped with a logged reason.
"""

from __future__ import annotations

import logging
import re
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from bugzoo.config import (
    check_run_config,
    compose_run,
    multirun_choices,
    register_groups,
    register_scenarios,
)
from bugzoo.detector_registry import DETECTORS, load_detector, user_params
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.harness.runner import execute_and_store
from bugzoo.harness.store import ensure_writable
from bugzoo.paths import CONF_DIR
from bugzoo.scenarios import get_scenario, missing_cuda

log = logging.getLogger(__name__)


def plural(count: int, noun: str) -> str:
    """``1 alarm``, ``2 alarms``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def format_summary(summary: dict, path: str, alarms: list[dict] = ()) -> str:
    """A one-screen summary of a finished run, with each alarm its detectors raised."""

    def fmt(key: str) -> str:
        value = summary.get(key)
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = [
        f"run       {summary['scenario']}  seed={summary['seed']}  steps={summary['steps']}"
        f"  device={summary['device']}",
        f"outcome   {summary['outcome']}" + (f"  ({summary['error']})" if summary["error"] else ""),
        f"loss      initial {fmt('initial_loss')} (log C = {fmt('expected_initial_loss')})"
        f"  final {fmt('final_loss')}",
        f"accuracy  val {fmt('final_val_acc')}  holdout {fmt('holdout_acc')}",
        f"grad norm median {fmt('median_grad_norm')}  max {fmt('max_grad_norm')}"
        f"   non-finite: {fmt('nonfinite')}",
        f"time      {fmt('wall_s')} s",
    ]
    for name, status in summary.get("detectors", {}).items():
        state = (f"error: {status['error']}" if status["error"]
                 else plural(status["alarms"], "alarm"))
        lines.append(f"detector  {name}: {state}, "
                     f"{status['call_share']:.1%} of the run in its calls")
    for alarm in alarms:
        lines.append(f"alarm     step {alarm['step']}  {alarm['detector']}: {alarm['symptom']} "
                     f"({alarm['category']}) {alarm['message']}")
    lines.append(f"saved     {path}")
    return "\n".join(lines)


def run_job(cfg: DictConfig) -> dict:
    check_run_config(cfg)
    root = ensure_writable(cfg.harness.out_dir)
    detectors = [load_detector(name, **(params or {}))
                 for name, params in (cfg.get("detector") or {}).items()]
    result, path = execute_and_store(cfg, root, cfg.harness.get("sweep", "single"), detectors)
    print(format_summary(result.summary, path, result.alarms.to_dict("records")))
    return result.summary


def skip_reason(cfg: DictConfig) -> str | None:
    """Why a sweep job skips its scenario (as ``bugzoo bench`` does), or None to run it."""
    if cfg.get("scenario") and (excluded := get_scenario(cfg.scenario).excluded):
        return f"excluded ({excluded})"
    return missing_cuda(cfg.bug.id if cfg.get("bug") else None, str(cfg.harness.device))


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def _hydra_entry(cfg: DictConfig) -> None:
    try:
        if HydraConfig.get().mode == RunMode.MULTIRUN and (reason := skip_reason(cfg)):
            log.warning("skipping %s seed %s: %s", cfg.scenario, cfg.seed, reason)
            return
        run_job(cfg)
    except UsageError as e:
        print(f"bugzoo run: error: {e}", file=sys.stderr)
        sys.exit(2)


USAGE = """\
usage: bugzoo run [KEY=VALUE ...] [-m]

Train one run (or, with -m, a Hydra multirun) and store it under
<harness.out_dir>/<harness.sweep>/<scenario>/seed<k>/.

examples:
  bugzoo run scenario=mlp-double_softmax
  bugzoo run model=lstm bug=missing_zero_grad bug.onset=100 seed=3
  bugzoo run scenario=mlp-lr_too_high 'detector=[nonfinite,loss_plateau]'
  bugzoo run scenario=mlp-lr_too_high 'detector=[loss_plateau]' detector.loss_plateau.window=20
  bugzoo run -m 'scenario=glob(mlp-*)' seed=0,1,2

Choices: `bugzoo list scenarios|bugs|models|detectors`. Hydra's own help follows.
"""


DETECTOR_PARAM = re.compile(r"^\+{0,2}detector\.([\w-]+)\.(\w+)=(.*)$")


def with_detector_params(argv: list[str]) -> list[str]:
    """``argv`` with each detector parameter checked (a registered detector, a parameter of its
    constructor, a value in its range) and spelled as Hydra takes it: a detector's node holds
    no parameters, so ``detector.NAME.PARAM=V``, the form users try first, is Hydra's
    ``+detector.NAME.PARAM=V``."""
    spelled = []
    for item in argv:
        found = DETECTOR_PARAM.match(item)
        if found is None:
            spelled.append(item)
            continue
        name, param, value = found.groups()
        if name not in DETECTORS.names():
            raise unknown_choice("detector", name, DETECTORS.names())
        # a multirun's sweep (window=10,20) checks each value; a sweep function is Hydra's
        for one in ([] if "(" in value else value.split(",")):
            user_params(name, {param: one})
        spelled.append(item if item.startswith("+") else f"+{item}")
    return spelled


def main(argv: list[str]) -> int:
    """Validate the overrides up front (one-line errors), then hand over to Hydra."""
    if "--help" in argv or "-h" in argv:
        print(USAGE)
    argv = with_detector_params(argv)
    if not any(a.startswith("-") for a in argv):  # one run, with no Hydra flags
        register_groups()
        # raises UsageError on unknown ids, bad values or an unusable results folder; leaves
        # the run's own scenario in the config store, all that Hydra's compose needs (every
        # scenario there would cost it half a second)
        ensure_writable(compose_run(argv).harness.out_dir)
    else:
        # Hydra's help copies the config store once per group it lists: with every scenario
        # in it, that took 14 s. It lists them without scenarios (`bugzoo list scenarios`
        # does). A multirun looks its scenarios up in the store, and copies the store for
        # every job: it holds the scenarios and bugs the sweep can select.
        helping = any(a in ("--help", "-h", "--hydra-help") for a in argv)
        scenarios, bugs = ([], None) if helping else multirun_choices(
            [a for a in argv if not a.startswith("-")])
        register_groups(bugs)
        register_scenarios(scenarios)
    saved = sys.argv
    sys.argv = ["bugzoo run", *argv]
    try:
        _hydra_entry()
    finally:
        sys.argv = saved
    return 0



