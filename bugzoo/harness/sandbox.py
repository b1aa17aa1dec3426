"""Confinement for code bugzoo judges but does not trust: Linux namespaces, no privileges.

A confined process tree is started by util-linux's ``unshare`` in new user, mount, PID, network
and IPC namespaces (no network but a loopback that is down, no other process visible, nothing
shared through System V IPC), then :func:`seal_filesystem` turns every mount read-only and
covers the folders it must not read with empty ones. Each child it forks for one job calls
:func:`enter_private_job`: fresh mount, IPC and network namespaces again, an empty private
temporary folder and ``/dev/shm`` of its own, no capabilities, CPU and memory limits. So two jobs
share nothing writable, and a job sees neither the judge nor the other jobs.

Where user namespaces are not allowed (some containers, other systems) :func:`confinement`
says so, and callers label what they produce "unconfined".
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

NAMESPACES = "namespaces"  # the confinement's name on boards and grades
UNCONFINED = "unconfined"

_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME, _MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
# a user namespace locks these flags of the mounts it inherits: a remount must repeat them
_LOCKED_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC,
                 "noatime": _MS_NOATIME, "nodiratime": _MS_NODIRATIME,
                 "relatime": _MS_RELATIME, "strictatime": _MS_STRICTATIME}
_PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE = 38, 4
_CAPABILITY_VERSION_3 = 0x20080522

UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork",
           "--kill-child", "--mount-proc", "--net", "--ipc"]


class SandboxError(RuntimeError):
    """The confinement could not be set up as promised."""


@functools.cache
def confinement() -> str:
    """``"namespaces"`` when this machine lets an unprivileged process tree be confined (a
    trial run of :data:`UNSHARE` that seals its filesystem), else ``"unconfined"``."""
    if shutil.which("unshare") is None:
        return UNCONFINED
    trial_code = "from bugzoo.harness import sandbox; sandbox.seal_filesystem([])"
    try:
        trial = subprocess.run([*UNSHARE, sys.executable, "-c", trial_code],
                               capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return UNCONFINED
    return NAMESPACES if trial.returncode == 0 else UNCONFINED


def confined_command(argv: list[str]) -> list[str]:
    """``argv`` run in new namespaces, or as it is where :func:`confinement` says none."""
    return [*UNSHARE, *argv] if confinement() == NAMESPACES else list(argv)


def read_message(stream) -> bytes | None:
    """One message from ``stream`` (a 4-byte big-endian length, then the body), or ``None`` at
    its end: the framing on every pipe to and from a confined tree."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    return stream.read(size)


def write_message(stream, body: bytes) -> None:
    stream.write(struct.pack(">I", len(body)) + body)
    stream.flush()


# ----------------------------------------------------------------- inside the confined tree
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    encoded = [s.encode() if s is not None else None for s in (source, target, fstype, data)]
    _check(_libc().mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]),
           f"mount {target}")


def mounts() -> list[tuple[str, set[str]]]:
    """Every mount point of this mount namespace with the per-mount options of the mount on
    top there (one mounted over another hides it)."""
    found: dict[str, set[str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")  # spaces come as \040
        found.pop(point, None)
        found[point] = set(fields[5].split(","))
    return list(found.items())


def seal_filesystem(hidden: list[Path]) -> None:
    """Cover each of ``hidden`` with an empty read-only folder, then make every mount read-only.
    Call once, as the confined tree's first process, before any untrusted code loads."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    for path in outermost([Path(p).resolve() for p in hidden if Path(p).exists()]):
        _mount("tmpfs", str(path), "tmpfs", _MS_NOSUID | _MS_NODEV, "size=4k,mode=555")
    for point, options in mounts():
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        flags |= sum(f for name, f in _LOCKED_FLAGS.items() if name in options)
        try:
            _mount(None, point, None, flags)
        except SandboxError:
            if os.path.exists(point):  # a mount over a path that is gone cannot be written
                raise
    writable = [p for p, options in mounts() if "ro" not in options and os.path.exists(p)]
    if writable:
        raise SandboxError(f"still writable after sealing: {', '.join(writable)}")
    _check(_libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def outermost(paths: list[Path]) -> list[Path]:
    """``paths`` without those inside another of them (covering the outer one hides both)."""
    return sorted({p for p in paths if not any(p != q and p.is_relative_to(q) for q in paths)})


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def enter_private_job(tmp: Path, cpu_s: int, memory_bytes: int) -> None:
    """In a child forked for one job: namespaces of its own, an empty private ``tmp`` and
    ``/dev/shm``, then no capabilities, no new privileges, and CPU and address-space limits."""
    libc = _libc()
    _check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWNET), "unshare")
    for point in (str(tmp), "/dev/shm"):
        if os.path.isdir(point):
            _mount("tmpfs", point, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=256m,mode=1777")
    os.environ["TMPDIR"] = str(tmp)
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def end_strays() -> None:
    """As the PID namespace's first process: kill every other process in it (what a finished
    job left running) and reap them."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != me:
            try:
                os.kill(int(entry.name), 9)
            except ProcessLookupError:
                pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
