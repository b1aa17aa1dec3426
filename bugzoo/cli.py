"""The ``bugzoo`` command line: one table of commands, grouped as ``bugzoo --help`` shows them.

Each command is a word that runs a function (given the words after it) or that takes a word of
its own (``bugzoo check detector NAME``, ``bugzoo task grade``, ``bugzoo results validate``);
the help of every level is made from the table. ``bugzoo run`` is a Hydra application
(overrides, ``-m`` multirun, launchers); the other commands use argparse. Bad input ends with
a one-line error and exit code 2. The spellings of 1.x (``bugzoo check-bug``, ``bugzoo
validate``, ``--models``, ...) still work for one release, each with a one-line notice.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import signal
import sys
import textwrap
from dataclasses import dataclass, field

from bugzoo import versions
from bugzoo.errors import UsageError, unknown_choice
from bugzoo.paths import include

SIGPIPE_STATUS = 128 + signal.SIGPIPE  # a process that a closed pipe ended (141)
WIDTH = 96


@dataclass(frozen=True)
class Command:
    """One word of the command line: the function it runs (``module:function``, given the
    words after it), or the words that may follow it."""

    help: str
    target: str = ""
    words: dict[str, Command] = field(default_factory=dict)
    usage: str = ""  # what follows the word, for its line in the help


CHECK = {
    "detector": Command("the conformance suite on one detector plug-in",
                        "bugzoo.judge.conformance:main", usage="NAME [KEY=VALUE ...]"),
    "bug": Command("the bug author's check: card, plant invisible before its onset, "
                   "determinism, blindness, quick validate", "bugzoo.judge.bugcheck:main",
                   usage="ID [--model M ...]"),
}
TASK = {
    "make": Command("write a task folder and its answer key", "bugzoo.teach.tasks.make:main",
                    usage="SCENARIO --out DIR --key KEYDIR"),
    "grade": Command("grade a diagnosis and a fix by retraining", "bugzoo.teach.tasks.grade:main",
                     usage="DIR --submission SUB --key KEYDIR"),
    "set": Command("every exportable scenario as a task", "bugzoo.teach.tasks.taskset:set_main",
                   usage="--out DIR"),
    "agents": Command("score the reference solvers (results/agents.md)",
                      "bugzoo.teach.tasks.taskset:agents_main", usage="--set DIR"),
    "validate": Command("prove each exported pair shows its bug's symptom "
                        "(results/validity_exported.md)", "bugzoo.teach.tasks.exported:main"),
    "harmless": Command("whether the grader accepts each model's harmless changes as the same "
                        "result (results/harmless.md)", "bugzoo.teach.tasks.harmless:main"),
    "watched": Command("bugzoo watch on every valid exported pair and on clean loops written "
                       "outside bugzoo (results/watch.md)", "bugzoo.teach.tasks.watched:main"),
}
RESULTS = {
    "validate": Command("prove every scenario's bug manifests against its control "
                        "(statistical test), and that every healthy variant is healthy",
                        "bugzoo.judge.validity:main", usage="[--changed]"),
    "traces": Command("export a sweep's observations as a compact trace set (for bugzoo "
                      "replay)", "bugzoo.harness.traceset:main", usage="export SWEEP_DIR"),
    "provenance": Command("carry stored results across a change: prove it neutral (same "
                          "traces under both checkouts), or rekey them across a change of the "
                          "key scheme alone", "bugzoo.judge.prove:main",
                          usage="prove [--against CHECKOUT] | rekey --against CHECKOUT"),
    "perf": Command("speed figures: baselines, overhead, sweep efficiency, profile, rescoring, "
                    "what --changed redoes", "bugzoo.judge.perf:main", usage="WHAT"),
    "gpu": Command("the GPU pass, into results/gpu (--dry-run checks it on the CPU)",
                   "bugzoo.judge.gpu:main"),
    "coverage": Command("tally the published fault-taxonomy leaves the catalogue plants "
                        "(results/coverage.md)", "bugzoo.teach.coverage:main"),
    "pages": Command("write the figures README and the guides quote from results/ (--check: "
                     "list the stale ones)", "bugzoo.judge.quotes:main", usage="[--check]"),
    "tools": Command("write results/tools.md: the field's tools on a scored Lite sweep beside "
                     "the suite", "bugzoo.judge.tools_page:main", usage="[--sweep DIR]"),
    "index": Command("write results/README.md: what each results file is and its command",
                     "bugzoo.judge.results_index:main"),
    "release": Command("freeze the release's manifest into results/release.json",
                       "bugzoo.release:main"),
    "trace-fields": Command("write the trace's fields into the detector guide",
                            "bugzoo.trace:main"),
}
COMMANDS = {
    "bench": Command("sweep scenarios x seeds with detectors, each buggy run beside its "
                     "disarmed twin, then score (Lite unless --full)", "bugzoo.judge.bench:main"),
    "score": Command("recompute the leaderboard of a stored sweep", "bugzoo.judge.scoring:main",
                     usage="SWEEP_DIR"),
    "replay": Command("score sealed detectors on stored runs or a trace set, without training",
                      "bugzoo.judge.replay:main", usage="SWEEP_DIR|TRACE_SET"),
    "lite": Command("bugzoo-bench Lite: its frozen scenarios, its rule; --agreement with the "
                    "full board", "bugzoo.judge.lite:main"),
    "run": Command("train one run (Hydra overrides; -m for a sweep)",
                   "bugzoo.harness.app:main", usage="[KEY=VALUE ...]"),
    "check": Command("check a plug-in", words=CHECK),
    "watch": Command("watch a plain PyTorch script's training with the sealed detectors, no "
                     "code change", "bugzoo.integrations.watch_command:main",
                     usage="-- python train.py"),
    "check-trace": Command("rescore a saved trace (bugzoo watch's, or a stored run's)",
                           "bugzoo.integrations.watch_command:check_trace_main",
                           usage="TRACE_DIR"),
    "tensorboard": Command("write stored runs as TensorBoard logs (trace scalars, alarms as "
                           "text)", "bugzoo.integrations.tensorboard:main", usage="RUN_DIR"),
    "list": Command("list bugs, models, scenarios or detectors",
                    "bugzoo.teach.catalogue:list_main", usage="WHAT"),
    "show": Command("show one bug: metadata, BUGGY and FIXED code",
                    "bugzoo.teach.catalogue:show_main", usage="BUG"),
    "curves": Command("draw a bug's symptom curves, clean vs buggy", "bugzoo.judge.curves:main",
                      usage="BUG [--model M ...]"),
    "quiz": Command("spot-the-bug quiz in the terminal (answers from stdin)",
                    "bugzoo.teach.quiz:main"),
    "export": Command("write a standalone buggy.py / fixed.py pair", "bugzoo.teach.export:main",
                      usage="SCENARIO --out DIR"),
    "report": Command("build the static HTML catalogue under results/report",
                      "bugzoo.teach.report:main"),
    "exercise": Command("guided exercises: plant a NaN, overfit one batch",
                        "bugzoo.teach.exercises:main", usage="NAME"),
    "task": Command("find-and-fix tasks graded by retraining", words=TASK),
    "interview": Command("a candidate pack of find-and-fix tasks and an interviewer key with a "
                         "hint ladder", "bugzoo.teach.tasks.interview:main"),
    "results": Command("make and check what results/ holds (maintainers)", words=RESULTS),
}
GROUPS = {
    "Benchmark a debugging tool": ["bench", "score", "replay", "lite", "run", "check"],
    "Watch your own training": ["watch", "check-trace", "tensorboard"],
    "The catalogue, teaching and interviews": ["list", "show", "curves", "quiz", "export",
                                               "report", "exercise", "task", "interview"],
    "Maintaining the benchmark": ["results"],
}
# the spellings of 1.x, kept for one release: old words -> today's
RENAMED = {"check-bug": ["check", "bug"], "validate": ["results", "validate"],
           "traces": ["results", "traces"], "provenance": ["results", "provenance"],
           "perf": ["results", "perf"], "gpu": ["results", "gpu"],
           "coverage": ["results", "coverage"], "pages": ["results", "pages"]}
MODEL_COMMANDS = (("curves",), ("check", "bug"), ("results", "perf"), ("task", "harmless"))


def help_text(words: list[str], table: dict[str, Command]) -> str:
    """The help of ``bugzoo WORDS``: the commands that may follow, grouped at the top level."""
    def line(word: str, command: Command) -> str:
        head = f"  {word} {command.usage}".rstrip()
        if command.words:
            head = f"  {word} {'|'.join(command.words)}"
        indent = " " * 31
        if len(head) >= 30:  # the help on lines of its own
            return head + "\n" + textwrap.fill(command.help, WIDTH, initial_indent=indent,
                                               subsequent_indent=indent)
        return textwrap.fill(head.ljust(30) + " " + command.help, WIDTH,
                             subsequent_indent=indent, break_long_words=False)

    prog = " ".join(["bugzoo", *words])
    lines = [f"usage: {prog} COMMAND ...", ""]
    if not words:
        lines = ["usage: bugzoo COMMAND ...", "",
                 "A benchmark suite of planted PyTorch training bugs.", ""]
        for title, names in GROUPS.items():
            lines += [f"{title}:", *(line(n, table[n]) for n in names), ""]
        lines += [textwrap.fill(
            "bugzoo --version prints the versions of bugzoo and torch. Every command with "
            "options takes --include DIR (repeatable): scenario files from an outside folder, "
            "as BUGZOO_SCENARIO_PATH adds them. bugzoo COMMAND --help tells more.", WIDTH)]
    else:
        lines += [*(line(n, c) for n, c in table.items()), "",
                  f"{prog} COMMAND --help tells more."]
    return "\n".join(lines)


def spelled_today(argv: list[str]) -> list[str]:
    """``argv`` in today's spelling, with a one-line notice for each old spelling it used."""
    def notice(old: str, new: str) -> None:
        print(f"bugzoo: `{old}` is now `{new}`; the old spelling goes in the next release",
              file=sys.stderr)

    if argv and argv[0] in RENAMED:
        old, new = f"bugzoo {argv[0]}", RENAMED[argv[0]]
        if argv[0] == "validate" and "--exported" in argv:  # the exports live in the tasks
            old, new = "bugzoo validate --exported", ["task", "validate"]
            argv = [a for a in argv if a != "--exported"]
        notice(old, f"bugzoo {' '.join(new)}")
        argv = [*new, *argv[1:]]
    if len(argv) > 1 and argv[0] == "check" and argv[1] not in CHECK and \
            not argv[1].startswith("-"):
        notice("bugzoo check NAME", "bugzoo check detector NAME")
        argv = ["check", "detector", *argv[1:]]
    if any(tuple(argv[:len(c)]) == c for c in MODEL_COMMANDS):
        if "--models" in argv:
            notice("--models", "--model")
            argv = ["--model" if a == "--models" else a for a in argv]
        if argv[0] == "curves" and any(a.startswith("model=") for a in argv):
            notice("bugzoo curves BUG model=M", "bugzoo curves BUG --model M")
            argv = [w for a in argv for w in (["--model", a[6:]] if a.startswith("model=")
                                              else [a])]
    return argv


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
    # force: a command run in this process before (Hydra's `run`, a test) may have left
    # handlers bound to streams that are closed by now
    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[StderrHandler()],
                        force=True)
    try:
        return _dispatch(argv)
    except BrokenPipeError:  # the reader left (`| head`, `| grep -q`): stop quietly, as git does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit cannot fail again
        return SIGPIPE_STATUS


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] == "--version":
        print(versions())
        return 0
    argv = spelled_today(argv)
    words, table, rest = [], COMMANDS, argv
    while True:  # down the table, one word at a time
        if not rest or rest[0] in ("-h", "--help"):
            print(help_text(words, table))
            return 0 if rest else 2
        if rest[0] not in table:
            kind = "command" if not words else f"{' '.join(words)} command"
            print(f"{' '.join(['bugzoo', *words])}: error: "
                  f"{unknown_choice(kind, rest[0], table)}", file=sys.stderr)
            return 2
        command = table[rest[0]]
        words, rest = [*words, rest[0]], rest[1:]
        if not command.words:
            return _run(words, command, rest)
        table = command.words


def _run(words: list[str], command: Command, rest: list[str]) -> int:
    prog = " ".join(["bugzoo", *words])
    module, func = command.target.split(":")
    try:
        if words == ["run"]:  # Hydra's parser takes no --include: its folders join the path here
            rest = _take_includes(rest)
        function = getattr(importlib.import_module(module), func)
        if not inspect.signature(function).parameters:  # a maintainer's writer: no options
            if rest and rest not in (["-h"], ["--help"]):
                raise UsageError(f"takes no arguments, got {' '.join(rest)}")
            if rest:
                print(f"usage: {prog}\n\n{command.help}")
                return 0
            return int(function() or 0)
        return int(function(rest) or 0)
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def _take_includes(argv: list[str]) -> list[str]:
    """``argv`` without its ``--include DIR`` / ``--include=DIR`` options, whose folders join
    the scenario path (for this process and every process it starts); every other command's
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
