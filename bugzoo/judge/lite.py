"""bugzoo-bench Lite: a frozen subset of the test-split board, chosen by a rule that reads no
run, and what a plain ``bugzoo bench`` sweeps.

The rule (:data:`RULE`) was written before any detector's result on its subset was looked at,
and it reads only the catalogue: bugs, scenarios, models and the models' declared run costs.
Its selection is frozen in ``results/lite.json`` (``bugzoo lite --freeze``); a bench sweeps the
frozen list, so a bug added later changes Lite only at a release that freezes it again (a test
fails until then). ``bugzoo lite --agreement`` measures how Lite agrees with the full board on
the published test split's own runs (``results/outcomes.parquet``): the same outcomes,
restricted to Lite's scenarios at the split's first seed.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pandas as pd
from scipy import stats

from bugzoo.bugs import get_bug
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness.sweep import select_scenarios
from bugzoo.judge.scoring import PUBLISHED_OUTCOMES, leaderboard, without_honeypots
from bugzoo.judge.tables import markdown
from bugzoo.models import get_model
from bugzoo.scenarios import Scenario, get_scenario

FROZEN = Path("results/lite.json")
AGREEMENT = Path("results/lite_agreement")  # .csv and .md
HEALTHY_EVERY = 3  # every third healthy variant
SCORED_ABOVE = 0.05  # the detectors whose ranks the agreement compares (the floor)

RULE = (
    "For each silent bug (not loud) of the default sweep, one of its proven scenarios (not "
    "marked unproven): the one on the model with the fewest bugs chosen so far, bugs taken in "
    "id order; ties go to the model with the lower declared run cost, then to the scenario id. "
    "Every third healthy variant in id order (a bench runs the clean scenarios that control no "
    "bug; a model's default is each buggy run's twin). One fresh test-split seed for every "
    "run; every buggy run beside its disarmed twin; the decoy pair every bench runs for each "
    "model.")


def lite_selection(scenarios: list[Scenario]) -> list[str]:
    """The ids :data:`RULE` chooses among ``scenarios`` (a bench's choice: buggy scenarios and
    healthy variants), sorted."""
    silent = [s for s in scenarios if not s.clean and not get_bug(s.bug).loud and not s.unproven]
    chosen, per_model = [], Counter()
    for bug in sorted({s.bug for s in silent}):
        pick = min((s for s in silent if s.bug == bug),
                   key=lambda s: (per_model[s.model], get_model(s.model).run_cost_s, s.id))
        chosen.append(pick.id)
        per_model[pick.model] += 1
    healthy = sorted(s.id for s in scenarios if s.clean)
    return sorted([*chosen, *healthy[::HEALTHY_EVERY]])


def frozen_ids(path: Path = FROZEN) -> list[str]:
    """The frozen Lite selection."""
    if not path.is_file():
        raise UsageError(f"no frozen Lite selection at {path}: run `bugzoo lite --freeze`")
    return json.loads(path.read_text())["scenarios"]


def frozen_scenarios(path: Path = FROZEN) -> list[Scenario]:
    """The frozen selection's scenarios that can run here (CUDA-only ones left out)."""
    wanted = set(frozen_ids(path))
    return [s for s in select_scenarios(sorted(wanted), controls=False) if s.id in wanted]


def freeze(path: Path = FROZEN) -> list[str]:
    """Write :data:`RULE`'s selection of today's default sweep into ``path``."""
    ids = lite_selection(select_scenarios(None, device="cpu", controls=False))
    path.write_text(json.dumps({"rule": RULE, "made_by": "bugzoo lite --freeze",
                                "scenarios": ids}, indent=1) + "\n")
    return ids


def on_lite(table: pd.DataFrame, ids: list[str], seed: int) -> pd.DataFrame:
    """The rows of ``table`` a Lite sweep of the same split would have made: Lite's
    scenarios (and twins) at the split's first seed, ``seed``."""
    return table[table["scenario"].isin(ids) & (table["seed"] == seed)]


def agreement(table: pd.DataFrame, ids: list[str], seed: int
              ) -> tuple[pd.DataFrame, float, int]:
    """Per detector, its full-board score with interval beside its Lite score on the same
    split's runs (:func:`on_lite` at ``seed``), and whether Lite falls inside; Kendall's tau
    over the detectors whose full score is above :data:`SCORED_ABOVE`, and how many those
    are."""
    table, _ = without_honeypots(table)
    full = leaderboard(table).set_index("detector")
    lite = leaderboard(on_lite(table, ids, seed)).set_index("detector")
    rows = []
    for name in full.index:
        f, li = full.loc[name], lite.loc[name] if name in lite.index else None
        score = float(li["score"]) if li is not None else math.nan
        rows.append({"detector": name, "role": f["role"], "full_score": f["score"],
                     "full_lo": f["score_lo"], "full_hi": f["score_hi"], "full_bugs": f["bugs"],
                     "lite_score": score, "lite_bugs": li["bugs"] if li is not None else 0,
                     "inside": bool(f["score_lo"] <= score <= f["score_hi"])})
    board = pd.DataFrame(rows)
    ranked = board[(board["full_score"] > SCORED_ABOVE) & board["lite_score"].notna()]
    tau = stats.kendalltau(ranked["full_score"], ranked["lite_score"]).statistic
    return board, float(tau), len(ranked)


def write_agreement(results: Path, ids: list[str], command: str) -> str:
    """:func:`agreement` on the published board's outcomes and split, into :data:`AGREEMENT`."""
    published = results / PUBLISHED_OUTCOMES
    seed = json.loads((results / "split.json").read_text())["seeds"][0]
    board, tau, n = agreement(pd.read_parquet(published), ids, seed)
    inside = board[board["full_score"] > SCORED_ABOVE]["inside"]
    board.to_csv(AGREEMENT.with_suffix(".csv"), index=False)
    shown = board.round(3).astype(object).where(board.notna(), "–")
    text = "\n".join([
        "# bugzoo-bench Lite against the full board", "",
        f"Regenerate with `{command}`. The published test split's own outcomes "
        f"(`{published}`), scored on the whole split and on the runs a Lite sweep of it would "
        "have made (Lite's scenarios and their twins at the split's first seed); the selection "
        f"is `{FROZEN}`, made by the rule below, which reads no run.", "",
        f"> {RULE}", "",
        f"Kendall's tau between the two scores over the {n} detectors and suites whose full "
        f"score is above {SCORED_ABOVE:g}: **{tau:.3f}** (tau-b: detectors of equal score "
        f"tie); of those, {int(inside.sum())} of "
        f"{len(inside)} have their Lite score inside their full-board interval.", "",
        markdown(shown), ""])
    AGREEMENT.with_suffix(".md").write_text(text)
    return text


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo lite", description=__doc__.splitlines()[0])
    p.add_argument("--freeze", action="store_true",
                   help=f"write the rule's selection of today's catalogue into {FROZEN}")
    p.add_argument("--agreement", action="store_true",
                   help=f"measure Lite against the full board on {PUBLISHED_OUTCOMES}, into "
                   f"{AGREEMENT}.md and .csv")
    args = p.parse_args(argv)
    ids = freeze() if args.freeze else frozen_ids()
    if args.agreement:
        print(write_agreement(Path("results"), ids, command_line("lite", argv)))
        return 0
    for scenario_id in ids:
        print(scenario_id, get_scenario(scenario_id).model, sep="\t")
    print(f"{len(ids)} scenarios: {RULE}")
    return 0
