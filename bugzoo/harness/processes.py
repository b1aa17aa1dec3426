"""Where bugzoo's worker processes come from: a fork server that has imported torch once.

A fresh interpreter spends seconds of CPU before it can train: importing torch, pandas, Hydra
and the harness, and, on its first run, ``torch._inductor`` (which
``torch.use_deterministic_algorithms`` imports) and every bug module. Sweep workers, one-run
processes, the ranks of distributed runs, overhead timers and task scripts are instead forked
from one server process per parent that has done these imports (``multiprocessing``'s
``forkserver`` start method): a new worker is ready in a fraction of a second, with nothing of
the parent's state but what it is sent.

A forked process takes its environment variables from the server, not from the parent at the
time it starts; ``sys.path`` and the working folder it does take from the parent. So the server
is started again whenever the parent's environment has changed since it started (a test's
private ``BUGZOO_ROOT``, a plug-in site on ``PYTHONPATH``, the quiz's ``PYTHONWARNINGS``). The
server does nothing but fork: it runs no torch operation, so no thread pool or device state is
copied into a worker.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from multiprocessing import forkserver, util
from multiprocessing.context import BaseContext

from bugzoo.bugs import builtin_ids

# what every worker needs before its first run; imported once, in the server (with the
# built-in bug modules: importing them is most of a worker's first composition)
PRELOAD = ["torch", "torch._inductor.config", "pandas", "bugzoo.harness.pool"]
# set anew for every test by pytest, and read by nothing at start-up
VOLATILE = ("PYTEST_CURRENT_TEST",)
STANDARD_STARTS = ("fork", "spawn", "forkserver")  # multiprocessing's own start methods

_server_environment: int | None = None
_retired: list[int] = []  # servers of an older environment, left to exit with their last worker
# one thread at a time restarts the server or collects retired ones (task validation starts a
# script and its twin from two threads)
_lock = threading.RLock()
_server_copy = False  # this process is a fresh copy of the server (see mark_server_copy)


def environment_key() -> int:
    """What a worker takes from its parent when it starts: environment, ``sys.path``, folder."""
    return hash((_environment(), tuple(sys.path), os.getcwd()))


def worker_context() -> BaseContext:
    """The context to start worker processes from: the fork server, started again if the
    environment it would pass on is no longer this process's. (``sys.path`` and the working
    folder each new worker takes from this process, as it starts.)"""
    global _server_environment
    with _lock:
        if multiprocessing.get_start_method(allow_none=True) not in (None, *STANDARD_STARTS):
            # each child is told its parent's start method and sets it; one that multiprocessing
            # does not know (a joblib worker's "loky") would fail every child at its start
            multiprocessing.set_start_method(None, force=True)
        context = multiprocessing.get_context("forkserver")
        key = hash(_environment())
        if key != _server_environment:
            _retire_server()
            context.set_forkserver_preload(
                PRELOAD + [f"bugzoo.bugs.{bug_id}" for bug_id in builtin_ids()])
            _server_environment = key
        _reap_retired()
        return context


def mark_server_copy() -> None:
    """Declare this process a fresh copy of the fork server: forked from it, with its imports,
    and no torch work done yet (a sweep's one-run process, before its run). Its ranks are then
    forked from it directly (:func:`rank_context`), as the server would fork them, instead of
    from a server of its own that would import everything again."""
    global _server_copy
    _server_copy = True


def rank_context() -> BaseContext:
    """The context to start a distributed run's ranks from: this process itself when it is a
    fresh copy of the server (:func:`mark_server_copy`), else the fork server."""
    return multiprocessing.get_context("fork") if _server_copy else worker_context()


def exit_with_parent() -> None:
    """End this process as soon as the process that started it is gone, even killed with -9:
    a killed sweep or run must leave no training process behind. (The starter need not be this
    process's parent in the operating system's sense, a fork server may be: it is watched
    through the pipe it sent this process's start on, which closes when it dies.)"""
    starter = multiprocessing.parent_process()

    def watch() -> None:
        starter.join()
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _environment() -> frozenset[tuple[str, str]]:
    return frozenset((k, v) for k, v in os.environ.items() if k not in VOLATILE)


def server_pids() -> set[int]:
    """The fork servers this process has started that still run: the current one (it lives as
    long as this process) and retired ones whose workers have not all ended yet."""
    _reap_retired()
    current = forkserver._forkserver._forkserver_pid
    return set(_retired) | ({current} if current is not None else set())


def _retire_server() -> None:
    """Let the running server go, without waiting: it exits once its workers have (each holds
    its "alive" pipe too), and the next start launches a new one. ``multiprocessing`` has no
    public call for this; its own ``_stop`` would wait for every worker of the old server."""
    server = forkserver._forkserver
    if server._forkserver_pid is None:
        return
    os.close(server._forkserver_alive_fd)
    if not util.is_abstract_socket_namespace(server._forkserver_address):
        os.unlink(server._forkserver_address)
    _retired.append(server._forkserver_pid)
    server._forkserver_pid = server._forkserver_alive_fd = server._forkserver_address = None


def _reap_retired() -> None:
    """Collect the exit status of retired servers that have ended (no zombie is left)."""
    with _lock:
        for pid in list(_retired):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    _retired.remove(pid)
            except ChildProcessError:
                _retired.remove(pid)
