"""Where bugzoo's worker processes come from: a fork server that has imported torch once.

A fresh interpreter spends seconds of CPU before it can train: importing torch, pandas, Hydra
and the harness, and, on its first run, ``torch._inductor`` (which
``torch.use_deterministic_algorithms`` imports) and every bug module. Sweep workers, one-run
processes, the ranks of distributed runs, overhead timers and task scripts are instead forked
from one server process per parent that has done these imports (``multiprocessing``'s
``forkserver`` start method): a new worker is ready in a fraction of a second, with nothing of
the parent's state but what it is sent.

A forked process takes its environment variables from the server, not from the parent at the
time it starts; ``sys.path`` and the working folder it does take from the parent. So each
environment the parent has had gets a server of its own (a test's private ``BUGZOO_ROOT``, a
plug-in site on ``PYTHONPATH``, the quiz's ``PYTHONWARNINGS``): when the environment changes, the
running server is parked and another started, and when it changes back, the parked one serves
again instead of importing everything anew. A variable a library sets in the parent to the
value a worker would give it itself (torch's compile cache folder, joblib's OpenMP workaround)
counts as unset. The server does nothing but fork: it runs no torch operation, so no thread
pool or device state is copied into a worker.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from contextlib import suppress
from multiprocessing import forkserver, util
from multiprocessing.context import BaseContext

from bugzoo.bugs import builtin_ids

# what every worker needs before its first run; imported once, in the server (with the
# built-in bug modules: importing them is most of a worker's first composition)
PRELOAD = ["torch", "torch._inductor.config", "pandas", "bugzoo.harness.pool"]
# set anew for every test by pytest, and read by nothing at start-up
VOLATILE = ("PYTEST_CURRENT_TEST",)


def _inductor_cache_dir() -> str:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir  # torch has, by then

    return os.path.abspath(default_cache_dir())


# variables a library writes into the parent's environment as it works, each to the value a
# worker, importing the same library, gives it itself: at that value they count as unset
DEFAULTED = {"KMP_INIT_AT_FORK": lambda: "FALSE",  # joblib, on import
             "TORCHINDUCTOR_CACHE_DIR": _inductor_cache_dir}  # inductor, on first use
PARKED_SERVERS = 2  # servers kept for environments other than the current one
STANDARD_STARTS = ("fork", "spawn", "forkserver")  # multiprocessing's own start methods

_server_environment: int | None = None
# servers of other environments, newest last: environment key -> (pid, alive fd, address)
_parked: dict[int | None, tuple[int, int, str]] = {}
_retired: list[int] = []  # servers let go, left to exit with their last worker
# one thread at a time restarts the server or collects retired ones (task validation starts a
# script and its twin from two threads)
_lock = threading.RLock()
_server_copy = False  # this process is a fresh copy of the server (see mark_server_copy)


def environment_key() -> int:
    """What a worker takes from its parent when it starts: environment, ``sys.path``, folder."""
    return hash((_environment(), tuple(sys.path), os.getcwd()))


def worker_context() -> BaseContext:
    """The context to start worker processes from: the fork server of this process's
    environment, the one parked for it when there is one, else a new one at the next start.
    (``sys.path`` and the working folder each new worker takes from this process, as it
    starts.)"""
    global _server_environment
    with _lock:
        if multiprocessing.get_start_method(allow_none=True) not in (None, *STANDARD_STARTS):
            # each child is told its parent's start method and sets it; one that multiprocessing
            # does not know (a joblib worker's "loky") would fail every child at its start
            multiprocessing.set_start_method(None, force=True)
        context = multiprocessing.get_context("forkserver")
        key = hash(_environment())
        if key != _server_environment:
            _park_server(_server_environment)
            if not _unpark_server(key):  # else the next start launches a server for this one
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
    return frozenset((k, v) for k, v in os.environ.items()
                     if k not in VOLATILE and not (k in DEFAULTED and v == DEFAULTED[k]()))


def server_pids() -> set[int]:
    """The fork servers this process has started that still run: the current one and the parked
    ones (each lives as long as this process, or until let go), and those let go whose workers
    have not all ended yet."""
    _reap_retired()
    current = forkserver._forkserver._forkserver_pid
    parked = {pid for pid, _, _ in _parked.values()}
    return set(_retired) | parked | ({current} if current is not None else set())


def _park_server(key: int | None) -> None:
    """Set the running server aside for environment ``key``; the oldest parked one beyond
    ``PARKED_SERVERS`` is let go. ``multiprocessing`` keeps one server per process in one
    object, so parking takes its state out of that object (and unparking puts it back)."""
    server = forkserver._forkserver
    if server._forkserver_pid is None:
        return
    _parked.pop(key, None)
    _parked[key] = (server._forkserver_pid, server._forkserver_alive_fd,
                    server._forkserver_address)
    server._forkserver_pid = server._forkserver_alive_fd = server._forkserver_address = None
    while len(_parked) > PARKED_SERVERS:
        _retire(*_parked.pop(next(iter(_parked))))


def _unpark_server(key: int) -> bool:
    """Make the server parked for environment ``key`` the running one, if it still runs."""
    if key not in _parked:
        return False
    pid, alive_fd, address = _parked.pop(key)
    if _has_exited(pid):
        _retire(pid, alive_fd, address)
        return False
    server = forkserver._forkserver
    server._forkserver_pid, server._forkserver_alive_fd = pid, alive_fd
    server._forkserver_address = address
    return True


def _retire(pid: int, alive_fd: int, address: str) -> None:
    """Let a server go, without waiting: it exits once its workers have (each holds its
    "alive" pipe too). ``multiprocessing`` has no public call for this; its own ``_stop``
    would wait for every worker of the server."""
    os.close(alive_fd)
    if not util.is_abstract_socket_namespace(address):
        with suppress(FileNotFoundError):
            os.unlink(address)
    _retired.append(pid)


def _has_exited(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


def _reap_retired() -> None:
    """Collect the exit status of retired servers that have ended (no zombie is left)."""
    with _lock:
        for pid in [pid for pid in _retired if _has_exited(pid)]:
            _retired.remove(pid)
