"""The confined side of sealed scoring: ``python -m bugzoo.judge.sealed_zygote``.

Started by :mod:`bugzoo.judge.sealed` inside new namespaces (:mod:`bugzoo.harness.sandbox`),
as the first process of its PID namespace. It loads the library and bugzoo's own detectors but
no outside plug-in, seals the filesystem (read-only, the scored folders covered), then serves
one job at a time
from its standard input: a run's facts, its trace records and the detectors to show them to.
For each job it forks a child that enters a private job (namespaces, temporary folder and
``/dev/shm`` of its own, no capabilities, limits), imports the detectors, streams the records
to them and writes back their alarms and statuses as JSON. The zygote then ends whatever the
child left running, so nothing a job did reaches the next one.

Messages on the pipes are a 4-byte big-endian length and a body: pickles from the judge (who is
trusted), JSON back (never unpickled by the judge).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pickle
import select
import statistics  # noqa: F401 - loaded once here for every child: most detectors read it
import sys
import time
from pathlib import Path

from bugzoo.detector_registry import DETECTORS, load_detector
from bugzoo.harness import sandbox
from bugzoo.harness.budget import budget_scope
from bugzoo.harness.sandbox import read_message, write_message
from bugzoo.harness.watch import Watch, call_all
from bugzoo.telemetry import observations
from bugzoo.trace import RunFacts

MAX_REPLY = 64 << 20  # bytes of JSON a job may send back


def score_job(job: dict) -> dict:
    """In the job's child: the detectors of ``job`` shown its records, as in a live run."""
    facts = RunFacts(**job["facts"])
    watches, failed = [], {}
    for name in job["detectors"]:
        try:
            watches.append(Watch(load_detector(name), job["budget_s"]))
        except Exception as e:  # a plug-in that does not import is recorded, not fatal
            failed[name] = f"load: {type(e).__name__}: {e}"
    records = observations(*job["records"])
    start = time.perf_counter()
    with budget_scope():
        call_all(watches, "setup", facts)
        for record in records:
            call_all(watches, "observe", record)
        call_all(watches, "teardown")
    wall_s = time.perf_counter() - start
    statuses = {w.detector.name: w.status(wall_s).as_dict() for w in watches}
    return {"alarms": [a for w in watches for a in w.alarms], "statuses": statuses,
            "failed": failed, "records": len(records)}


def serve_job(job: dict, private_tmp: Path, limits: dict, confined: bool) -> dict:
    """Fork a child for ``job``, wait for its reply at most ``limits["wall_s"]``, end what it
    left running; the reply, or an ``error`` saying why there is none."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing of the zygote's pipes, a private job, then the job
        os.close(read_end)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(2, 1)  # what a detector prints goes to the log
        code = 0
        try:
            if confined:
                sandbox.enter_private_job(private_tmp, limits["cpu_s"], limits["memory_bytes"])
            body = json.dumps(score_job(job), default=str).encode()
        except BaseException as e:  # noqa: B036 - the child must always answer
            body, code = json.dumps({"error": f"{type(e).__name__}: {e}"}).encode(), 1
        if len(body) > MAX_REPLY:
            body = json.dumps({"error": f"a reply of over {MAX_REPLY} bytes"}).encode()
        with os.fdopen(write_end, "wb") as out:
            out.write(body)
        os._exit(code)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + limits["wall_s"]
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([read_end], [], [], left)
        if not ready:
            break
        chunk = os.read(read_end, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    timed_out = time.monotonic() >= deadline
    os.close(read_end)
    if confined:
        sandbox.end_strays()
    else:
        if timed_out:
            os.kill(pid, 9)
        os.waitpid(pid, 0)
    body = b"".join(chunks)
    if timed_out:
        return {"error": f"the job ran past {limits['wall_s']:.0f} s and was ended"}
    try:
        return json.loads(body)
    except ValueError:
        return {"error": "the job ended without a reply (a crash, or a limit reached)"}


def main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    header = pickle.loads(read_message(stdin))
    confined = header["confinement"] == sandbox.NAMESPACES
    if confined:
        sandbox.seal_filesystem([Path(p) for p in header["hidden"]])
    # the library loaded once, before any job: each child starts with it, and with no plug-in
    DETECTORS.entry_points()  # the plug-ins' names, not their code
    for name in DETECTORS.names():  # bugzoo's own detectors, whose code is the library's too:
        if DETECTORS.is_own(name):  # each child then starts with them loaded
            with contextlib.suppress(ImportError):  # an optional tool not installed here
                DETECTORS.load(name)
    gc.freeze()  # a child's collections then leave the zygote's pages shared (a fork is cheap)
    write_message(stdout, json.dumps({"ready": header["confinement"]}).encode())
    while (message := read_message(stdin)) is not None:
        job = pickle.loads(message)
        reply = serve_job(job, Path(header["private_tmp"]), header["limits"], confined)
        write_message(stdout, json.dumps({"job": job["job"], **reply}).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
