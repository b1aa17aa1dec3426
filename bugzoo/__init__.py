"""bugzoo: a benchmark suite of planted PyTorch training bugs.

The package in layers, each importing only from the layers listed before it:

* core (``bugzoo/``): ``registry`` (one registry class for every kind of plug-in), ``data``,
  ``models``, ``bugs`` (one file per bug), ``train`` (the clean loop), ``telemetry``,
  ``detector`` (the plug-in contract), ``detector_registry``, ``scenarios``, ``config``;
* ``bugzoo.harness``: running runs (one in this process, on several ranks, a sweep of many),
  and the results store;
* ``bugzoo.integrations``: detectors inside the loops users train with (Lightning, Hugging
  Face, TensorBoard, a live watch, a plain loop watched);
* ``bugzoo.judge``: judging detectors and the benchmark (``bench``, scoring, validity,
  conformance, curves, perf, the GPU pass);
* ``bugzoo.teach``: the catalogue, the quiz, the HTML report, exercises, reproducer export;
* ``bugzoo.tools``: existing debugging tools run over the whole benchmark (TrainCheck, Cockpit).

The built-in detectors live beside the package, in ``detectors/`` (importable as
``bugzoo_detectors``), and use only the contract below, as any third party's would.

The names below are the plug-in contract, importable from ``bugzoo`` directly. They load on
first use, so ``import bugzoo`` stays cheap (no torch until a name that needs it is touched).
"""

from __future__ import annotations

import functools
import importlib
from importlib import metadata
from typing import TYPE_CHECKING

__version__ = "2.0.0"


def versions() -> str:
    """``bugzoo <version>, torch <version>``: what every sweep, leaderboard and report records
    (read from the installed metadata, so torch is not imported)."""
    return f"bugzoo {__version__}, torch {metadata.version('torch')}"


def cpu_kernels() -> str:
    """The CPU kernels torch dispatches to on this machine (``AVX2``, ``AVX512``, ``DEFAULT``;
    ``ATEN_CPU_CAPABILITY`` picks a lower one). A run is bitwise repeatable on one kind at most:
    other kernels round differently, so every sweep and run records which it used."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what :mod:`platform` reports).
    Two CPUs with the same kernels can still round differently (their BLAS picks its code path
    by the processor, not only by its instructions), so runs record the model too."""
    import platform
    from pathlib import Path

    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


_EXPORTS = {
    "Bug": "bugzoo.bugs", "get_bug": "bugzoo.bugs", "list_bugs": "bugzoo.bugs",
    "Alarm": "bugzoo.detector", "Detector": "bugzoo.detector", "RunView": "bugzoo.detector",
    "load_detector": "bugzoo.detector_registry",
    "Observation": "bugzoo.telemetry", "watch": "bugzoo.integrations.loop",
    "get_scenario": "bugzoo.scenarios", "list_scenarios": "bugzoo.scenarios",
    "check_bug": "bugzoo.judge.bugcheck", "check_detector": "bugzoo.judge.conformance",
    "parametrize_with_checks": "bugzoo.judge.conformance",
}
__all__ = ["Alarm", "Bug", "Detector", "Observation", "RunView", "check_bug", "check_detector",
           "get_bug", "get_scenario", "list_bugs", "list_scenarios", "load_detector",
           "parametrize_with_checks", "versions", "watch"]

if TYPE_CHECKING:
    from bugzoo.bugs import Bug, get_bug, list_bugs
    from bugzoo.detector import Alarm, Detector, RunView
    from bugzoo.detector_registry import load_detector
    from bugzoo.integrations.loop import watch
    from bugzoo.judge.bugcheck import check_bug
    from bugzoo.judge.conformance import check_detector, parametrize_with_checks
    from bugzoo.scenarios import get_scenario, list_scenarios
    from bugzoo.telemetry import Observation


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bugzoo' has no attribute {name!r}")
