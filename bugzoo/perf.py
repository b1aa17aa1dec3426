"""``bugzoo perf``: speed figures, measured as ratios within one process.

* ``baselines`` — per model, one clean run on its defaults: initial loss vs log(C), single-batch
  overfit, val and holdout accuracy, and the wall time (median of 3).
* ``overhead`` — per model, median step time of the instrumented loop (telemetry) and of the
  loop with detectors watching, each relative to the bare loop; blocks are interleaved so
  machine noise hits every variant alike.

Tables go to ``results/perf/`` with the command that made them.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from bugzoo.config import compose_run
from bugzoo.data.base import forever
from bugzoo.detector import default_detectors, load_detector
from bugzoo.errors import ArgumentParser
from bugzoo.harness.runner import Watch, execute, run_view
from bugzoo.models import MODELS
from bugzoo.smoke import overfit_single_batch
from bugzoo.tables import markdown
from bugzoo.train import Trainer

OUT = Path("results/perf")


def baselines(models: list[str], repeats: int = 3) -> pd.DataFrame:
    rows = []
    for model in models:
        cfg = compose_run([f"model={model}"])
        runs = [execute(cfg).summary for _ in range(repeats)]
        overfit = overfit_single_batch(cfg)
        s = runs[0]
        rows.append({
            "model": model, "initial_loss": round(s["initial_loss"], 3),
            "log_C": round(s["expected_initial_loss"], 3),
            "overfit_step_below_0.05": overfit["reached_step"],
            "final_val_acc": round(s["final_val_acc"], 3), "holdout_acc": round(s["holdout_acc"], 3),
            "wall_s_median_of_3": round(statistics.median(r["wall_s"] for r in runs), 2),
        })
    return pd.DataFrame(rows)


class LoopVariant:
    """One trainer stepping in blocks: bare (no telemetry), instrumented, or with detectors."""

    def __init__(self, model: str, kind: str, detectors: list[str]):
        self.kind = kind
        self.trainer = Trainer(compose_run([f"model={model}", "harness.steps=100000"])).build()
        self.trainer.model.train()
        self.trainer.batches = forever(self.trainer.train_loader)
        self.watches = [Watch(load_detector(d)) for d in detectors] if kind == "detectors" else []
        for w in self.watches:
            w.call("setup", run_view(self.trainer))
        self.times: list[float] = []

    def block(self, steps: int) -> None:
        t = self.trainer
        for _ in range(steps):
            t0 = time.perf_counter()
            t.data_s = 0.0
            loss = t.train_step()
            t.unscale_gradients()
            if self.kind != "bare":
                t.telemetry.measure_gradients()
            t.clip_gradients()
            t.optimizer_step()
            t.scheduler_step()
            if self.kind != "bare":
                obs = t.telemetry.observe(t.step, loss, lr=t.lr(), training=True, step_s=0.0,
                                          data_s=t.data_s, elapsed_s=0.0, cuda_mb=0.0, scale=None)
                for w in self.watches:
                    w.call("observe", obs)
            else:
                loss.item()  # the bare loop still reads its loss once per step
            t.step += 1
            self.times.append(time.perf_counter() - t0)

    def close(self) -> None:
        for w in self.watches:
            w.call("teardown")


def overhead(models: list[str], detectors: list[str], blocks: int = 12, steps: int = 20
             ) -> pd.DataFrame:
    rows = []
    for model in models:
        torch.manual_seed(0)
        variants = [LoopVariant(model, k, detectors) for k in ("bare", "telemetry", "detectors")]
        for v in variants:
            v.block(5)  # warm-up
            v.times.clear()
        for _ in range(blocks):
            for v in variants:
                v.block(steps)
        for v in variants:
            v.close()
        bare = statistics.median(variants[0].times)
        rows.append({"model": model, "bare_step_ms": round(1000 * bare, 2),
                     "telemetry_x": round(statistics.median(variants[1].times) / bare, 3),
                     "all_detectors_x": round(statistics.median(variants[2].times) / bare, 3),
                     "detectors": len(detectors)})
    return pd.DataFrame(rows)


def write(table: pd.DataFrame, name: str, title: str, command: str, note: str = "") -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT / f"{name}.csv", index=False)
    text = [f"# {title}", "", f"Regenerate with `{command}` "
            f"(torch {torch.__version__}, {torch.get_num_threads()} thread(s)).", ""]
    if note:
        text += [note, ""]
    (OUT / f"{name}.md").write_text("\n".join([*text, markdown(table), ""]))
    return OUT / f"{name}.md"


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo perf", description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["baselines", "overhead"])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--detectors", nargs="+", help="default: the default detector suite")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    command = " ".join(["bugzoo perf", *argv])
    if args.what == "baselines":
        path = write(baselines(args.models), "baselines", "Clean baselines", command)
    else:
        detectors = args.detectors or default_detectors()
        note = ("Ratios of median step time to the bare loop (no telemetry, no detectors), "
                "interleaved blocks in one process. Detectors: " + ", ".join(detectors) + ".")
        path = write(overhead(args.models, detectors), "overhead", "Loop overhead", command,
                     note)
    print(path.read_text())
    return 0
