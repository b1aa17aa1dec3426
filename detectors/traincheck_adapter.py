"""TrainCheck (invariant inference for training pipelines, OSDI 2025) run offline on exported
scenarios.

TrainCheck instruments a whole *script* (``traincheck-collect``), infers invariants from
traces of correct runs (``traincheck-infer``) and checks a new run's trace against them
(``traincheck-check``). It has no per-step in-process API a bugzoo :class:`Detector` could
drive, so this adapter is offline and not a registered detector:

1. ``bugzoo export``'s standalone mlp scripts (plain PyTorch) are written with ``STEPS`` cut
   to ``steps`` and the seed replaced;
2. the clean script is traced once per ``train_seeds`` seed and invariants are inferred
   from all those traces;
3. the clean control and each scenario's buggy script are traced at ``check_seed`` (a seed not
   trained on) with collection restricted to the invariants (``-i``), then checked.

A scenario's alarms are its violated invariants; ``new`` counts those the clean control at the
same seed does not violate (the clean control's own violations are false positives of
invariants inferred from few short traces). Run::

    python -m bugzoo_detectors.traincheck_adapter --out results/traincheck [--steps 20] \\
        [--scenarios mlp-missing_zero_grad ...]

Optional: needs ``pip install -c constraints.txt 'bugzoo-bench[tools]'`` (``traincheck``).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bugzoo.detector import Alarm
from bugzoo.judge.tables import markdown

log = logging.getLogger(__name__)

EXTRA_HINT = "TrainCheck is not installed: pip install -c constraints.txt 'bugzoo-bench[tools]'"
DEFAULT_SCENARIOS = ("mlp-missing_zero_grad", "mlp-lr_too_high", "mlp-log_of_zero",
                     "mlp-frozen_from_start", "mlp-double_softmax")
STEPS_LINE = re.compile(r"^STEPS, (.*?) = \d+,", re.M)
SEED_LINE = "torch.manual_seed(0)"


def available() -> str | None:
    """Why TrainCheck cannot run here, or ``None`` when its three commands are on PATH."""
    missing = [c for c in ("traincheck-collect", "traincheck-infer", "traincheck-check")
               if shutil.which(c) is None]
    return f"{', '.join(missing)} not found ({EXTRA_HINT})" if missing else None


def script(scenario: str, kind: str, steps: int, seed: int) -> str:
    """The exported ``kind`` ("buggy" or "fixed") script of ``scenario``, shortened and reseeded."""
    from bugzoo.teach.export import render

    text = render(scenario)[kind]
    if not STEPS_LINE.search(text) or SEED_LINE not in text:
        raise ValueError(f"exported script of {scenario} lacks the STEPS line or {SEED_LINE}")
    text = STEPS_LINE.sub(lambda m: f"STEPS, {m.group(1)} = {steps},", text, count=1)
    return text.replace(SEED_LINE, f"torch.manual_seed({seed})", 1)


def _run(cmd: list[str], cwd: Path, log_name: str) -> float:
    """Run one TrainCheck command; returns its wall time; raises with the log's tail on failure."""
    t0 = time.perf_counter()
    with open(cwd / log_name, "w") as out:
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = (cwd / log_name).read_text()[-2000:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{tail}")
    return time.perf_counter() - t0


def _plain_s(path: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, path.name], cwd=path.parent, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def check_script(text: str, name: str, invariants: Path, work: Path) -> dict:
    """Trace and check one script; returns TrainCheck's violation summary plus timings."""
    path = work / f"{name}.py"
    path.write_text(text)
    collect_s = _run(["traincheck-collect", "-p", path.name, "-i", str(invariants),
                      "--output-dir", f"trace_{name}"], work, f"collect_{name}.log")
    check_s = _run(["traincheck-check", "-f", f"trace_{name}", "-i", str(invariants), "-o",
                    f"check_{name}", "--no-html-report"], work, f"check_{name}.log")
    summary = json.loads((work / f"check_{name}" / f"trace_{name}" /
                          "violations_summary.json").read_text())
    return {**summary, "collect_s": collect_s, "check_s": check_s, "plain_s": _plain_s(path)}


def alarms(summary: dict, ignore: set[str] = frozenset()) -> list[Alarm]:
    """One alarm per violated invariant (not in ``ignore``), at TrainCheck's first step."""
    return [Alarm(int(v["first_step"]), "traincheck_invariant", "unknown",
                  f"traincheck {v['relation_type']}: {v['display_name']}")
            for v in summary.get("violations", []) if v["display_name"] not in ignore]


def run_offline(scenarios: list[str], out: Path, steps: int = 20,
                train_seeds: tuple[int, ...] = (0, 1), check_seed: int = 2) -> pd.DataFrame:
    """Infer invariants from clean traces, check the clean control and each scenario."""
    reason = available()
    if reason:
        raise ImportError(reason)
    work = Path(out)
    work.mkdir(parents=True, exist_ok=True)
    infer_s = 0.0
    for seed in train_seeds:
        name = f"clean_train{seed}"
        (work / f"{name}.py").write_text(script(scenarios[0], "fixed", steps, seed))
        infer_s += _run(["traincheck-collect", "-p", f"{name}.py", "--output-dir",
                         f"trace_{name}"], work, f"collect_{name}.log")
    invariants = work / "invariants.json"
    infer_s += _run(["traincheck-infer", "-f", *[f"trace_clean_train{s}" for s in train_seeds],
                     "-o", invariants.name], work, "infer.log")
    control = check_script(script(scenarios[0], "fixed", steps, check_seed), "clean",
                           invariants, work)
    control_names = {v["display_name"] for v in control.get("violations", [])}
    rows = [_row("mlp-clean", control, None)]
    for scenario in scenarios:
        rows.append(_row(scenario, check_script(script(scenario, "buggy", steps, check_seed),
                                                scenario, invariants, work), control_names))
    table = pd.DataFrame(rows)
    table.attrs["infer_s"] = infer_s
    return table


def _row(scenario: str, summary: dict, control: set[str] | None) -> dict:
    """A table row; ``new`` and ``flagged`` are relative to the clean control (None for it)."""
    new = alarms(summary, ignore=control or set()) if control is not None else []
    return {"scenario": scenario,
            "violated": int(summary.get("distinct_invariants_violated", 0)),
            "new": len(new) if control is not None else None,
            "flagged": bool(new) if control is not None else None,
            "first_step": min((a.step for a in new), default=None),
            "new_invariants": "; ".join(a.message.split(": ", 1)[1] for a in new),
            "overhead": round((summary["collect_s"] + summary["check_s"])
                              / summary["plain_s"], 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bugzoo_detectors.traincheck_adapter",
                                description="Run TrainCheck offline on exported mlp scenarios.")
    p.add_argument("--out", required=True, help="work folder for scripts, traces and reports")
    p.add_argument("--scenarios", nargs="+", default=list(DEFAULT_SCENARIOS))
    p.add_argument("--steps", type=int, default=20, help="training steps of every script")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    table = run_offline(args.scenarios, Path(args.out), steps=args.steps)
    table.to_csv(Path(args.out) / "table.csv", index=False)
    shown = table.astype({"new": "Int64", "first_step": "Int64"}).astype(object).fillna("-")
    print(markdown(shown.assign(new_invariants=shown["new_invariants"].str.slice(0, 90))))
    print(f"\ninference (clean traces + infer): {table.attrs['infer_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
