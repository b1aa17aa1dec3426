"""``bugzoo watch -- python train.py ARGS``: a script's own loop watched with no code change;
``bugzoo check-trace FOLDER``: a saved trace rescored.

``watch`` runs the script in this process, as ``python`` would (``__main__``, its folder first
on ``sys.path``, its arguments in ``sys.argv``), with one global optimizer step hook
(:func:`torch.optim.optimizer.register_optimizer_step_pre_hook`). At the first step of the
first optimizer, the hook finds the model that optimizer trains (the largest ``nn.Module``
holding its parameters among the variables of the calling code and the script's globals) and
attaches a :class:`~bugzoo.integrations.loop.LoopWatch` to that optimizer. The script's
``CLASSES`` and ``STEPS`` globals, when it has them, are the run's facts unless
``--classes``/``--steps`` say otherwise.
"""

from __future__ import annotations

import logging
import os
import runpy
import sys
import traceback
from pathlib import Path

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.integrations.loop import LoopWatch, user_frame
from bugzoo.integrations.recorder import DEFAULT_DETECTORS, check_trace, sealed_detectors

log = logging.getLogger(__name__)
PYTHONS = ("python", "python3", Path(sys.executable).name)


def trained_model(optimizer: torch.optim.Optimizer, scopes: list[dict]) -> nn.Module:
    """The largest module in ``scopes`` holding a parameter ``optimizer`` updates; without one,
    the optimizer's parameters gathered in a ParameterList."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    ids = {id(p) for p in params}
    found = [v for scope in scopes for v in scope.values() if isinstance(v, nn.Module)
             and any(id(p) in ids for p in v.parameters())]
    if found:
        return max(found, key=lambda m: sum(p.numel() for p in m.parameters()))
    return nn.ParameterList(params)


class ScriptWatch:
    """The global hook that attaches a LoopWatch to a script's first optimizer."""

    def __init__(self, options: dict):
        self.options = options
        self.loop: LoopWatch | None = None
        self.handle = register_optimizer_step_pre_hook(self.attach)

    def attach(self, optimizer, *_) -> None:
        if self.loop is not None:
            return
        script = sys.modules["__main__"].__dict__  # the running script's globals
        frames, frame = [], user_frame(sys._getframe(1))
        while frame is not None:
            frames.append(frame.f_locals)
            frame = frame.f_back
        model = trained_model(optimizer, [*frames, script])
        facts = {k: v if v is not None else int(script.get(name, 0) or 0)
                 for k, v, name in (("num_classes", self.options["num_classes"], "CLASSES"),
                                    ("steps", self.options["steps"], "STEPS"))}
        self.loop = LoopWatch(model, optimizer, detectors=self.options["detectors"],
                              trace=self.options["trace"], stop_on_alarm=self.options["stop"],
                              **facts)
        # its step hooks join this very step: torch reads the optimizer's own hooks after
        # the global ones
        self.loop.__enter__()

    def close(self, error: BaseException | None) -> bool:
        """Detach and write the trace; whether ``error`` was the watch's request to stop."""
        self.handle.remove()
        if self.loop is None:
            log.warning("bugzoo watch: the script took no optimizer step; nothing watched")
            return False
        return self.loop.__exit__(type(error) if error else None, error, None)


def script_command(command: list[str]) -> list[str]:
    """The script and its arguments given after ``--`` (a leading ``python`` dropped), checked."""
    if command and Path(command[0]).name in PYTHONS:
        command = command[1:]
    if not command or not command[0].endswith(".py"):
        raise UsageError("bugzoo watch runs a Python script: bugzoo watch [OPTIONS] -- python "
                         "SCRIPT.py [ARGS]")
    if not Path(command[0]).is_file():
        raise UsageError(f"script {command[0]} not found")
    return command


def run_watched(command: list[str], options: dict) -> int:
    """Run ``command`` (a script and its arguments) as ``__main__``, watched; its exit code."""
    script = Path(command[0]).resolve()
    sys.argv, sys.path[0:0] = [str(script), *command[1:]], [str(script.parent)]
    watcher = ScriptWatch(options)
    error: BaseException | None = None
    code = 0
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: B036 - the script's failure, reported after the watch
        error = e
    if watcher.close(error):
        print(f"bugzoo watch: stopped the run at the first alarm ({error})", file=sys.stderr)
        return 0
    loop = watcher.loop
    if loop is not None:
        where = f"; trace in {loop.trace}" if loop.trace else ""
        print(f"bugzoo watch: {len(loop.alarms)} alarms over {loop.index} steps from "
              f"{len(loop.names)} detectors{where}", file=sys.stderr)
    if error is not None:
        traceback.print_exception(error)
        return 1
    return code


def main(argv: list[str]) -> int:
    cut = argv.index("--") if "--" in argv else len(argv)
    p = ArgumentParser(prog="bugzoo watch", description=__doc__.splitlines()[0],
                       usage="bugzoo watch [OPTIONS] -- python SCRIPT.py [ARGS]")
    p.add_argument("--detectors", nargs="+", metavar="NAME", default=list(DEFAULT_DETECTORS),
                   help="sealed detectors or selectors (default: the sealed built-ins)")
    p.add_argument("--trace", type=Path, default=None,
                   help="folder to write the trace to (default: SCRIPT.trace, here)")
    p.add_argument("--classes", type=int, default=None,
                   help="classes of a classifier (default: the script's CLASSES, else 0)")
    p.add_argument("--steps", type=int, default=None,
                   help="optimizer steps planned (default: the script's STEPS, else 0)")
    p.add_argument("--stop-on-alarm", action="store_true", help="end the run at the first alarm")
    args = p.parse_args(argv[:cut])
    command = script_command(argv[cut + 1:])
    sealed_detectors(args.detectors)  # a bad name fails before the script starts
    trace = args.trace or Path(os.getcwd()) / f"{Path(command[0]).stem}.trace"
    return run_watched(command, {"detectors": args.detectors, "trace": trace,
                                 "num_classes": args.classes, "steps": args.steps,
                                 "stop": args.stop_on_alarm})


def check_trace_main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo check-trace",
                       description="rescore a saved trace (bugzoo watch's, or a stored run's)")
    p.add_argument("trace", type=Path, help="the trace folder")
    p.add_argument("--detectors", nargs="+", metavar="NAME", default=list(DEFAULT_DETECTORS),
                   help="sealed detectors or selectors (default: the sealed built-ins)")
    args = p.parse_args(argv)
    alarms = check_trace(args.trace, args.detectors)
    if alarms.empty:
        print("no alarm")
    else:
        print(alarms.to_string(index=False))
    return 0
