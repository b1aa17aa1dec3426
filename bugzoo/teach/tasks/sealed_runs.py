"""The grader's side of sealed grading: task scripts trained and evaluated in a confined tree.

:class:`SealedScripts` starts :mod:`~bugzoo.teach.tasks.sealed_server` in new namespaces
(:mod:`bugzoo.harness.sandbox`) with the folders a submission must not read covered
(:func:`secret_folders`: the answer key, bugzoo's own code, scenarios, docs and results, its
cache), no network, and no bugzoo importable. Each :meth:`~SealedScripts.run` trains one script
once with one seed, then sends its model the held-out inputs, and returns what the grader
checks (:class:`SealedRun`): the run's facts, its model's outputs, and the CPU time its whole
process tree used, counted outside it. Nothing the script sends is unpickled: the replies are
JSON and raw tensor bytes, checked on arrival. Where namespaces are not allowed the same path
runs unconfined, and :attr:`SealedScripts.confinement` says so.
"""

from __future__ import annotations

import atexit
import json
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

import bugzoo
from bugzoo.harness import sandbox
from bugzoo.harness.sandbox import read_message, write_message
from bugzoo.paths import cache_folder
from bugzoo.teach.tasks.runner import TRAIN_TIMEOUT_S, Trained
from bugzoo.teach.tasks.sealed_server import WireError, pack, unpack

PROTOCOL = "sealed-1"  # in every kept graded run's key: runs made another way are not reused
LIMITS = {"wall_s": TRAIN_TIMEOUT_S, "cpu_s": int(TRAIN_TIMEOUT_S), "memory_bytes": 8 << 30}


@dataclass
class SealedRun:
    """One sealed run of a script: what it trained, its model's outputs on the held-out inputs
    (or why there are none), and the CPU seconds its process tree used."""

    trained: Trained
    outputs: torch.Tensor | str
    cpu_s: float


def secret_folders(key: Path | None) -> list[Path]:
    """What a submission must not read: the answer ``key``, if any (and the folder of keys it
    sits in), bugzoo's package, its built-in detectors, the checkout's scenarios, docs and
    results, and bugzoo's cache."""
    package = Path(bugzoo.__file__).resolve().parent
    cache = cache_folder("task-runs")
    folders = [key or package, package, package.parent / "detectors", Path("results"),
               cache.parent.parent if cache else None]
    if (package.parent / "pyproject.toml").is_file():  # an editable checkout
        folders += [package.parent / name for name in ("scenarios", "conf", "docs", "results",
                                                       "tests")]
    if key is not None and any((sibling / "key.json").is_file()
                               for sibling in key.parent.iterdir() if sibling != key):
        folders.append(key.parent)
    return [folder.resolve() for folder in folders if folder is not None and folder.exists()]


def trained_of(seed: int, meta: dict, tensors: dict[str, torch.Tensor]) -> Trained:
    """A run's :class:`Trained` from its report, every field checked for its type."""
    error = meta.get("error")
    try:
        return Trained(seed, error=None if error is None else str(error)[:300],
                       steps=int(meta["steps"]), source=tensors.get("source"),
                       layers={str(k): int(v) for k, v in meta["layers"].items()},
                       losses=[float(v) for v in meta["losses"]],
                       grad_norms=[float(v) for v in meta["grad_norms"]],
                       observed={str(k): float(v) for k, v in meta["observed"].items()})
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise WireError(f"a malformed report ({type(e).__name__}: {e})") from None


class SealedScripts:
    """A confined server of task-script runs, one at a time (:func:`shared_servers` keeps them
    for reuse: each run forks a fresh child, so nothing passes from one run to the next)."""

    def __init__(self, hidden: list[Path]):
        self.hidden, self.lock = hidden, threading.Lock()
        self.confinement = sandbox.confinement()
        self.private_tmp = Path(tempfile.mkdtemp(prefix="bugzoo-grade-"))
        self.process: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        process = subprocess.Popen(
            sandbox.confined_command([sys.executable, "-m", "bugzoo.teach.tasks.sealed_server"]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        write_message(process.stdin, json.dumps({
            "hidden": [str(p) for p in self.hidden], "private_tmp": str(self.private_tmp),
            "limits": LIMITS, "confinement": self.confinement}).encode())
        ready = read_message(process.stdout)
        if ready is None or json.loads(ready).get("ready") != self.confinement:
            raise sandbox.SandboxError(f"the sealed grading server did not start "
                                       f"(status {process.wait()})")
        return process

    def _reply(self) -> tuple[dict, dict[str, torch.Tensor]]:
        body = read_message(self.process.stdout)
        if body is None:
            raise EOFError
        return unpack(body)

    def run(self, script: str, seed: int, source: str, inputs: tuple[torch.Tensor, ...],
            log: Path) -> SealedRun:
        """Train ``script`` once with ``seed``, keeping its global ``source`` (its data source),
        then evaluate its model on ``inputs``; the run's output goes to ``log``."""
        with self.lock:
            return self._run(script, seed, source, inputs, log)

    def _run(self, script: str, seed: int, source: str, inputs: tuple[torch.Tensor, ...],
             log: Path) -> SealedRun:
        if self.process is None:
            self.process = self._start()
        try:
            write_message(self.process.stdin, json.dumps(
                {"script": script, "seed": seed, "source": source}).encode())
            meta, tensors = self._reply()
            write_message(self.process.stdin,
                          pack({}, {str(i): x for i, x in enumerate(inputs)}))
            evaluated, answer = self._reply()
            usage, _ = self._reply()
            trained = trained_of(seed, meta, tensors)
            cpu_s = float(usage["cpu_s"])
        except (EOFError, OSError, WireError, KeyError, TypeError, ValueError) as e:
            self._stop()  # a server a run broke is not reused
            return SealedRun(Trained(seed, error=f"the sealed run failed ({e or type(e).__name__})"),
                             "no outputs", float("inf"))
        with log.open("a") as out:
            out.write(f"{meta.get('log', '')}\n")
        result = answer.get("outputs")
        return SealedRun(trained, result if evaluated.get("error") is None and result is not None
                         else str(evaluated.get("error")), cpu_s)

    def _stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def close(self) -> None:
        if self.process is not None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._stop()
        for leftover in self.private_tmp.iterdir():  # an unconfined run's files
            leftover.unlink()
        self.private_tmp.rmdir()


_shared: dict[tuple[str, ...], list[SealedScripts]] = {}
_shared_lock = threading.Lock()


def shared_servers(hidden: list[Path], count: int) -> list[SealedScripts]:
    """``count`` servers with ``hidden`` covered, started once in this process and reused by
    every grade that hides the same folders (a server start costs seconds: torch loads in it);
    servers hiding other folders are closed."""
    wanted = tuple(str(p) for p in hidden)
    with _shared_lock:
        for other in [k for k in _shared if k != wanted]:
            for server in _shared.pop(other):
                server.close()
        servers = _shared.setdefault(wanted, [])
        servers += [SealedScripts(hidden) for _ in range(count - len(servers))]
        return servers[:count]


@atexit.register
def _close_shared() -> None:
    for servers in _shared.values():
        for server in servers:
            server.close()
