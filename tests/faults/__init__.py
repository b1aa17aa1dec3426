"""Test-only fault injection: misbehaving detector plug-ins and helpers to install them.

The detectors in :mod:`faults.detectors` are published the way any third-party plug-in is:
:func:`install` writes a tiny distribution (the module plus a ``*.dist-info`` folder with an
``entry_points.txt`` in the ``bugzoo.detectors`` group) into a folder that is then put on
``sys.path`` / ``PYTHONPATH``. Spawned sweep workers inherit that path, so they find the plug-ins
through the ordinary entry-point lookup; nothing in the harness knows about tests.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

DIST = "bugzoo_faults"
PLUGINS = {"boom": "Boom", "crasher": "Crasher", "stall": "Stall", "meddler": "Meddler",
           "laggard": "Laggard",
           "slow_starter": "SlowStarter", "always_on": "AlwaysOn", "label_peeker": "LabelPeeker",
           "frame_reader": "FrameReader", "frame_reader_live": "FrameReaderLive",
           "thread_reader": "ThreadReader", "thread_reader_live": "ThreadReaderLive",
           "patch_reader": "PatchReader", "patch_reader_live": "PatchReaderLive",
           "order_reader": "OrderReader", "order_reader_live": "OrderReaderLive",
           "clean_oracle": "CleanOracle", "clean_oracle_live": "CleanOracleLive"}
# the cheats of the 2.0 board (tests/test_sealed_board.py): sealed, each with a live twin
CHEATS = ("frame_reader", "thread_reader", "patch_reader", "order_reader", "clean_oracle")


def install(site: Path) -> Path:
    """Write the fault plug-ins as an installed distribution under ``site``; returns ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__).with_name("detectors.py"), site / f"{DIST}.py")
    info = site / f"{DIST}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    lines = [f"{name} = {DIST}:{cls}" for name, cls in PLUGINS.items()]
    (info / "entry_points.txt").write_text("[bugzoo.detectors]\n" + "\n".join(lines) + "\n")
    return site


def env_with(site: Path) -> dict[str, str]:
    """The current environment with ``site`` first on PYTHONPATH (for real subprocesses)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    return env


def folder_digest(root: Path) -> str:
    """SHA-256 over every file path and content under ``root`` (to prove nothing changed)."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def descendants(pid: int | None = None) -> list[tuple[int, str]]:
    """Live (pid, command line) of every process below ``pid`` (default: this one), from /proc."""
    parent_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":  # zombies are gone already, only not yet reaped
            parent_of[int(stat.parent.name)] = int(fields[1])
    root, found = pid or os.getpid(), []
    for child in parent_of:
        p = child
        while p in parent_of and p != root:
            p = parent_of[p]
        if p == root and child != root:
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            found.append((child, cmd))
    return found
