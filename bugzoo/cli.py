"""The ``bugzoo`` command line: one verb per job.

``bugzoo run`` is a Hydra application (overrides, ``-m`` multirun, launchers); the other verbs
use argparse. Bad input ends with a one-line error and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys

from bugzoo import versions
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.paths import include

SIGPIPE_STATUS = 128 + signal.SIGPIPE  # a process that a closed pipe ended (141)

# verb -> ("module:function", one-line help). Each function takes the argv after the verb.
VERBS: dict[str, tuple[str, str]] = {
    "run": ("bugzoo.harness.app:main", "train one run (Hydra overrides; -m for a sweep)"),
    "list": ("bugzoo.teach.catalogue:list_main", "list bugs, models, scenarios or detectors"),
    "show": ("bugzoo.teach.catalogue:show_main", "show one bug: metadata, BUGGY and FIXED code"),
    "bench": ("bugzoo.judge.bench:main", "sweep scenarios x seeds with detectors, then score"),
    "score": ("bugzoo.judge.scoring:main", "recompute the leaderboard of a stored sweep"),
    "replay": ("bugzoo.judge.replay:main", "score sealed detectors on stored runs or a trace "
               "set, without training"),
    "lite": ("bugzoo.judge.lite:main", "bugzoo-bench Lite: its frozen scenarios, its rule; "
             "--agreement with the full board"),
    "traces": ("bugzoo.harness.traceset:main",
               "export a sweep's observations as a compact trace set (for bugzoo replay)"),
    "provenance": ("bugzoo.judge.prove:main", "prove a change neutral for stored runs (same "
                   "traces under both checkouts) and carry them"),
    "watch": ("bugzoo.integrations.watch_command:main", "watch a plain PyTorch script's "
              "training with the sealed detectors, no code change: -- python train.py"),
    "check-trace": ("bugzoo.integrations.watch_command:check_trace_main",
                    "rescore a saved trace (bugzoo watch's, or a stored run's)"),
    "tensorboard": ("bugzoo.integrations.tensorboard:main",
                    "write stored runs as TensorBoard logs (trace scalars, alarms as text)"),
    "check": ("bugzoo.judge.conformance:main", "run the conformance suite on one detector"),
    "check-bug": ("bugzoo.judge.bugcheck:main", "check one bug: card, plant, determinism, "
                  "blindness, quick validate"),
    "validate": ("bugzoo.judge.validity:main",
                 "prove every scenario's bug manifests (statistical test); --exported: each "
                 "exported buggy/fixed script pair, as bugzoo task validate"),
    "perf": ("bugzoo.judge.perf:main", "measure speed: baselines, telemetry/detector overhead"),
    "gpu": ("bugzoo.judge.gpu:main", "the GPU pass: what a CUDA machine measures, into "
            "results/gpu (--dry-run checks it on the CPU)"),
    "curves": ("bugzoo.judge.curves:main", "draw a bug's symptom curves, clean vs buggy"),
    "quiz": ("bugzoo.teach.quiz:main", "spot-the-bug quiz in the terminal (answers from stdin)"),
    "export": ("bugzoo.teach.export:main", "write a standalone buggy.py / fixed.py pair"),
    "coverage": ("bugzoo.teach.coverage:main", "tally the published fault-taxonomy leaves the "
                 "catalogue plants (results/coverage.md)"),
    "pages": ("bugzoo.judge.quotes:main", "write the figures README and the guides quote "
              "from results/ (--check: list the stale ones)"),
    "report": ("bugzoo.teach.report:main", "build the static HTML catalogue under results/report"),
    "exercise": ("bugzoo.teach.exercises:main", "guided exercises: plant a NaN, overfit one batch"),
    "interview": ("bugzoo.teach.tasks.interview:main", "a candidate pack of find-and-fix tasks "
                  "and an interviewer key with a hint ladder"),
    "task": ("bugzoo.teach.tasks.command:main", "find-and-fix tasks graded by retraining: make, "
             "grade, set, agents"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bugzoo", description="A benchmark suite of planted PyTorch training bugs.",
        epilog="bugzoo --version prints the versions of bugzoo and torch. Every verb takes "
        "--include DIR (repeatable): scenario files from an outside folder, as "
        "BUGZOO_SCENARIO_PATH adds them.")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, (_, help_text) in VERBS.items():
        sub.add_parser(verb, help=help_text, add_help=False)
    return parser


class StderrHandler(logging.StreamHandler):
    """Logs to whatever ``sys.stderr`` is now, so a later in-process call (tests swap stderr)
    never writes to a stream an earlier call saw and that has since been closed."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # force: a verb run in this process before (Hydra's `run`, a test) may have left handlers
    # bound to streams that are closed by now
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[StderrHandler()],
                        force=True)
    try:
        return _dispatch(argv)
    except BrokenPipeError:  # the reader left (`| head`, `| grep -q`): stop quietly, as git does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit cannot fail again
        return SIGPIPE_STATUS


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        _parser().print_help()
        return 0 if argv else 2
    if argv[0] == "--version":
        print(versions())
        return 0
    verb, rest = argv[0], argv[1:]
    if verb == "validate" and "--exported" in rest:  # the exports live in the teaching layer
        verb, rest = "task", ["validate", *(arg for arg in rest if arg != "--exported")]
    if verb not in VERBS:
        print(f"bugzoo: error: {unknown_choice('command', verb, VERBS)}", file=sys.stderr)
        return 2
    module, func = VERBS[verb][0].split(":")
    try:
        if verb == "run":  # Hydra's parser takes no --include: its folders join the path here
            rest = _take_includes(rest)
        return int(getattr(importlib.import_module(module), func)(rest) or 0)
    except UsageError as e:
        print(f"bugzoo {verb}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"bugzoo {verb}: interrupted", file=sys.stderr)
        return 130


def _take_includes(argv: list[str]) -> list[str]:
    """``argv`` without its ``--include DIR`` / ``--include=DIR`` options, whose folders join
    the scenario path (for this process and every process it starts); every other verb's
    parser takes the option itself (``bugzoo.errors.ArgumentParser``)."""
    kept, folders = [], []
    args = iter(argv)
    for arg in args:
        if arg == "--include":
            folder = next(args, None)
            if folder is None:
                raise UsageError("--include needs a folder of scenario files")
            folders.append(folder)
        elif arg.startswith("--include="):
            folders.append(arg.split("=", 1)[1])
        else:
            kept.append(arg)
    include(folders)
    return kept


if __name__ == "__main__":
    sys.exit(main())
