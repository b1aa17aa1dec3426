"""The tools layer: existing debugging tools run over the benchmark, offline, timed, or as
detectors.

``traincheck`` traces bugzoo's exported scripts with TrainCheck and scores its invariants on the
benchmark's own scoring; ``cockpit`` times the Cockpit detector against a plain run. They drive
the whole benchmark (export, runs, scoring), so they sit above every other layer. The other
modules adapt one tool each as a detector (``lightning_spikes``, ``lightning_finite``,
``hf_overflow``, ``torch_grad_norm``), registered as the built-ins are and scored on the tools
board (``results/tools.md``); each imports its tool only when a run starts.
"""

from __future__ import annotations

import importlib


def import_failure(module: str, needs: str) -> str | None:
    """Why the tool's ``module`` cannot be imported here, or None; ``needs`` says what to
    install."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        return f"{needs} ({e})"
    except RuntimeError as e:  # a broken dependency, e.g. a torchvision whose ops do not load
        return f"importing {module} failed: {e}"
    return None
