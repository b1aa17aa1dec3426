"""What the Cockpit detector flags on a few scenarios, and its wall-time overhead.

Each scenario runs twice at one seed, plain and with Cockpit watching; the table shows Cockpit's
first alarm and the ratio of the two wall times. Run ``python -m bugzoo.tools.cockpit``
(needs ``pip install -c constraints.txt 'bugzoo-bench[tools]'``).
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
import torch

from bugzoo.config import compose_run
from bugzoo.detector_registry import load_detector, unavailable
from bugzoo.harness.runner import execute
from bugzoo.judge.tables import markdown


def main(argv: list[str] | None = None) -> int:
    """Table of what Cockpit flags on a few scenarios, with its wall-time overhead."""
    p = argparse.ArgumentParser(prog="python -m bugzoo.tools.cockpit",
                                description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", nargs="+", default=[
        "mlp-clean", "mlp-missing_zero_grad", "mlp-lr_too_high", "mlp-log_of_zero",
        "mlp-frozen_from_start", "mlp-double_softmax", "mlp-init_too_large"])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if reason := unavailable("cockpit"):
        raise SystemExit(f"cockpit: {reason}")
    # warm-up, Cockpit and BackPACK imported: the timed runs pay neither
    execute(compose_run([f"scenario={args.scenarios[0]}", "harness.steps=5"]),
            [load_detector("cockpit")])
    rows = []
    for sid in args.scenarios:
        cfg = compose_run([f"scenario={sid}", f"harness.steps={args.steps}",
                           f"seed={args.seed}"])
        walls = {}
        for watched in (False, True):
            detector = load_detector("cockpit")
            t0 = time.perf_counter()
            result = execute(cfg, [detector] if watched else [])
            walls[watched] = time.perf_counter() - t0
        status = result.summary["detectors"]["cockpit"]
        first = result.alarms.sort_values("step").head(1)
        if detector.stood_down:  # set in setup, at the first step or at teardown
            status["error"] = f"stood down: {detector.stood_down}"
        rows.append({"scenario": sid, "alarms": status["alarms"],
                     "first": "" if first.empty else
                     f"{first['symptom'].iloc[0]} ({first['category'].iloc[0]}) "
                     f"@ step {first['step'].iloc[0]}",
                     "error": status["error"] or "",
                     "plain_s": round(walls[False], 2), "cockpit_s": round(walls[True], 2),
                     "overhead": f"{walls[True] / walls[False]:.1f}x"})
    print(markdown(pd.DataFrame(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
