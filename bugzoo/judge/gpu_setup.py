"""Set up a GPU machine that reaches no package registry, then start the GPU pass.

The GPU machines lent to this project have torch, pandas, scipy, matplotlib, pyarrow and tqdm,
but not hydra-core, omegaconf or antlr4, and cannot download them. So they travel with the
working tree as wheels:

* here, with a registry: ``python3 -m bugzoo.judge.gpu_setup download`` saves them into
  ``.whl/`` (ignored by git);
* there: ``python3 -m bugzoo.judge.gpu_setup run [PASS OPTIONS]`` installs the wheels that are
  missing and bugzoo itself (editable) without touching the network, then runs
  ``bugzoo results gpu [PASS OPTIONS]`` in a fresh interpreter that sees them.

Standard library only, since it runs before hydra is installed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout that holds pyproject.toml
WHEELS = ROOT / ".whl"
# what the GPU image lacks, at the versions this checkout is tested with; all three are pure
# Python, so one wheel serves every platform (antlr4 4.9.3 is published as a source archive
# only, and `download` builds its wheel)
CARRIED = {"hydra-core": "1.3.8", "omegaconf": "2.3.1", "antlr4-python3-runtime": "4.9.3"}


class MissingWheel(Exception):
    """A carried wheel is not where the set-up looks, or cannot serve this machine."""


def wheel_name(package: str, version: str) -> str:
    """The file-name prefix of ``package``'s wheel (names normalised as wheels spell them)."""
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"


def is_installed(package: str, version: str) -> bool:
    try:
        return metadata.version(package) == version
    except metadata.PackageNotFoundError:
        return False


def wheels_to_install(folder: Path, installed=is_installed) -> list[Path]:
    """The carried wheels in ``folder`` for the packages not installed at their version; a
    missing or platform-bound wheel is an error that names it and the command that fetches
    it."""
    chosen = []
    for package, version in CARRIED.items():
        if installed(package, version):
            continue
        found = sorted(folder.glob(f"{wheel_name(package, version)}*.whl"))
        if not found:
            raise MissingWheel(f"no wheel of {package}=={version} in {folder} (fetch it where "
                               "a registry is reachable: python3 -m bugzoo.judge.gpu_setup "
                               "download)")
        if not found[0].name.endswith("-py3-none-any.whl"):
            raise MissingWheel(f"{found[0].name} is not a pure-Python wheel")
        chosen.append(found[0])
    return chosen


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def download(folder: Path) -> None:
    """Save the carried packages' wheels into ``folder`` (building one from its source archive
    where only that is published)."""
    folder.mkdir(parents=True, exist_ok=True)
    pip("wheel", "--no-deps", "--wheel-dir", str(folder),
        *[f"{package}=={version}" for package, version in CARRIED.items()])
    wheels_to_install(folder, installed=lambda *_: False)  # each one there, and pure Python
    print(f"gpu_setup: wheels of {', '.join(CARRIED)} in {folder}")


def install_and_run(folder: Path, pass_args: list[str]) -> int:
    """Install the missing wheels and bugzoo without the network, then run the pass."""
    if wheels := wheels_to_install(folder):
        pip("install", "-q", "--no-index", "--no-deps", "--no-compile", *map(str, wheels))
    # editable, so the pass writes into this checkout; the machine's own setuptools builds it
    pip("install", "-q", "--no-index", "--no-deps", "--no-build-isolation", "-e", str(ROOT))
    return subprocess.run([sys.executable, "-m", "bugzoo.cli", "results", "gpu", *pass_args],
                          cwd=ROOT).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m bugzoo.judge.gpu_setup",
                                description=__doc__.splitlines()[0])
    p.add_argument("action", choices=["download", "run"])
    p.add_argument("--wheels", type=Path, default=WHEELS, help=f"default: {WHEELS}")
    args, pass_args = p.parse_known_args(argv)
    if args.action == "download" and pass_args:
        p.error(f"download takes no pass options: {' '.join(pass_args)}")
    try:
        if args.action == "download":
            download(args.wheels)
            return 0
        return install_and_run(args.wheels, pass_args)
    except MissingWheel as e:
        print(f"gpu_setup: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
