"""Checking that a planted bug manifests: buggy runs against clean runs of the same settings."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.harness.runner import execute


def clean_overrides(overrides: list[str]) -> list[str]:
    """The same overrides with the bug removed (the clean control of a buggy configuration)."""
    return [*overrides, "~bug"]


def scenario_overrides(scenario: str, extra: list[str] = ()) -> list[str]:
    return [f"scenario={scenario}", *extra]


@dataclass
class SymptomResult:
    """Outcome of one symptom check."""

    bug: str
    metric: str
    direction: str
    buggy: list
    clean: list
    p_value: float
    effect: float  # "higher"/"lower": difference of medians (buggy - clean); "event": rate diff

    def manifests(self, alpha: float) -> bool:
        return self.p_value < alpha

    def separates(self) -> bool:
        """Every buggy run is worse than every clean run (missing values count as worst)."""
        if self.direction in ("event", "varies"):
            return all(map(bool, self.buggy)) and not any(map(bool, self.clean))
        worst = -math.inf if self.direction == "lower" else math.inf
        buggy = [worst if x is None or x != x else x for x in self.buggy]
        if self.direction == "lower":
            return max(buggy) < min(self.clean)
        return min(buggy) > max(self.clean)


def compare(metric: str, direction: str, buggy: list, clean: list) -> tuple[float, float]:
    """One-sided test that ``buggy`` moved in ``direction`` from ``clean``: (p-value, effect)."""
    if direction in ("event", "varies"):  # "varies": values say whether two runs differed
        b, c = sum(map(bool, buggy)), sum(map(bool, clean))
        table = [[b, len(buggy) - b], [c, len(clean) - c]]
        p = stats.fisher_exact(table, alternative="greater").pvalue
        return float(p), b / len(buggy) - c / len(clean)
    # Missing values (e.g. no evaluation before a crash) count as the worst outcome.
    worst = math.inf if direction == "higher" else -math.inf
    fill = lambda xs: [worst if x is None or (isinstance(x, float) and math.isnan(x)) else x  # noqa: E731
                       for x in xs]
    bx, cx = fill(buggy), fill(clean)
    alternative = "greater" if direction == "higher" else "less"
    p = stats.mannwhitneyu(bx, cx, alternative=alternative).pvalue
    finite_b = sorted(x for x in bx if math.isfinite(x))
    finite_c = sorted(x for x in cx if math.isfinite(x))
    median = lambda xs: xs[len(xs) // 2] if xs else math.nan  # noqa: E731
    return float(p), median(finite_b) - median(finite_c)


def _measure(overrides: list[str], seed: int, metric: str, direction: str):
    """The metric of one run; for ``"varies"``, whether two runs with the same seed differ."""
    cfg = compose_run([*overrides, f"seed={seed}"])
    value = execute(cfg).summary.get(metric)
    if direction != "varies":
        return value
    return value != execute(compose_run([*overrides, f"seed={seed}"])).summary.get(metric)


def check_symptom(overrides: list[str], seeds: list[int], extra: list[str] = ()) -> SymptomResult:
    """Run the buggy configuration and its clean control over ``seeds`` and compare them."""
    base = [*overrides, *extra]
    cfg = compose_run([*base, f"seed={seeds[0]}"])
    bug = get_bug(cfg.bug.id)
    metric, direction = bug.symptom.metric, bug.symptom.direction
    buggy, clean = [], []
    for seed in seeds:
        buggy.append(_measure(base, seed, metric, direction))
        clean.append(_measure(clean_overrides(base), seed, metric, direction))
    p, effect = compare(metric, direction, buggy, clean)
    return SymptomResult(bug.id, metric, direction, buggy, clean, p, effect)

