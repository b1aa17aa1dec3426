"""What the fork server computes once for every process it forks (imported last in its preload,
:data:`bugzoo.harness.processes.PRELOAD`): the release digest each run summary records, and the
plug-in registries' entry points. A worker would otherwise compute both before its first run,
and a one-run process (a distributed or loud run) has no other. Nothing here runs a torch
operation. Should either fail, the server keeps nothing: each worker computes it again and
meets the error where it can report it.
"""

from __future__ import annotations

from bugzoo import release
from bugzoo.detector_registry import DETECTORS
from bugzoo.models import MODELS

try:
    release.digest()
    MODELS.names()
    DETECTORS.names()
except Exception:  # each worker computes it again, and reports the error where it can
    pass
