"""``bugzoo replay``: score sealed detectors on stored runs, without training.

A sealed detector (``Detector.sealed``) reads nothing but the trace: the run's facts and its
records. A CPU trace is bitwise reproducible, so the records read back from a stored run (a
sweep folder or a trace set, see :mod:`bugzoo.harness.traceset`) make it raise the alarms it
would raise live. Each stored run is scored sealed (:mod:`bugzoo.judge.sealed`: a confined
process per run, in a secret order, the stored runs hidden), and the alarms are scored by
:mod:`bugzoo.judge.scoring`. Nothing stored is changed; the tables go to ``--out`` only.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness.traceset import stored_runs
from bugzoo.judge.scoring import write_boards
from bugzoo.judge.sealed import sealed_outcomes, sealed_selection, secret_folders

log = logging.getLogger(__name__)


def replay_bench(source: Path, words: list[str] | None, out: Path | None) -> str:
    """Replay the detectors ``words`` select on ``source`` and score them; write the tables
    into ``out`` (when given, never into ``source``); return the leaderboard's Markdown."""
    source = Path(source)
    if out is not None and Path(out).resolve().is_relative_to(source.resolve()):
        raise UsageError(f"--out {out} is inside the replayed folder {source}: replay never "
                         "changes it")
    runs = stored_runs(source)  # a folder that holds no replayable run fails here, first
    names = sealed_selection(words)
    start = time.perf_counter()
    table = sealed_outcomes(runs, names, hidden=secret_folders(source),
                            progress=True)
    log.info("replayed %s on %d runs in %.1f s", ", ".join(names), len(table) // len(names),
             time.perf_counter() - start)
    command = command_line("replay", [str(source), "--detectors", ",".join(names),
                                      *(["--out", str(out)] if out else [])])
    return write_boards(table, None, source, command, [Path(out)] if out else [],
                        suite_label=" (replayable)")


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo replay", description=__doc__.splitlines()[0])
    p.add_argument("source", metavar="DIR",
                   help="a sweep folder or a trace set (e.g. results/traces)")
    p.add_argument("--detectors", nargs="+", metavar="NAME",
                   help="detector names and selectors (default: every replayable one of the "
                   "default selection)")
    p.add_argument("--out", help="where the tables go (default: printed only)")
    args = p.parse_args(argv)
    print(replay_bench(Path(args.source), args.detectors, Path(args.out) if args.out else None))
    return 0
