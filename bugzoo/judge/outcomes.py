"""What each detector did on each stored run, and suites of detectors as one.

A run is in one of three roles (its summary's ``role``): ``buggy``; ``control``, the buggy run's
disarmed twin, with the same configuration and the same seeds; or ``clean``, a healthy variant.
The outcome of one detector on one run is decided by its *first* alarm against the onset of the
run's bug (0 for a clean run):

* ``early``: before the onset, while a buggy run is still bitwise its control;
* a buggy run: ``hit`` (at or after the onset) or ``miss`` (no alarm);
* a control or a clean run: ``false_alarm`` (at or after the onset) or ``quiet``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from bugzoo.detector_registry import DETECTORS, detector_class, role_of
from bugzoo.errors import UsageError
from bugzoo.harness import store
from bugzoo.harness.setup_digest import summary_with_setup
from bugzoo.registry import OWN_DISTRIBUTION
from bugzoo.scenarios import registry

# Suites count a run as caught by the first alarm of any member: bugzoo's own detectors of the
# roles and scopes each names (baselines and outside plug-ins are never members), and for
# "suite: sealed" only those whose rows were scored sealed, the part of the suite that no
# training process can inform.
SUITES = {"suite: built-ins": (("heuristic",), ("generic", "targeted"), False),
          "suite: sealed": (("heuristic",), ("generic", "targeted"), True),
          "suite: generic": (("heuristic",), ("generic",), False),
          "suite: built-ins + tools": (("heuristic", "tool"), ("generic", "targeted"), False)}
AMBIGUOUS = "ambiguous"  # a suite's diagnosis when members name different causes at one step
# how a detector's row was scored: inside the training process it judged, trusted not to look
# where it should not; sealed rows say "sealed (<confinement>)" (:mod:`bugzoo.judge.sealed`)
IN_PROCESS = "in-process (trusted)"
SEALED = "sealed"


def sealed_label(confinement: str) -> str:
    """How a row scored sealed says so: ``sealed (<confinement>)``."""
    return f"{SEALED} ({confinement})"


def scored_sealed(scored: pd.Series) -> pd.Series:
    """Which rows' ``scored`` column says they were scored sealed."""
    return scored.fillna("").str.startswith(SEALED)


def run_role(summary: dict) -> str:
    """The run's role; runs stored before roles were recorded are buggy or clean."""
    return summary.get("role") or ("buggy" if summary.get("bug") else "clean")


def _onset_time(elapsed: pd.Series, onset: int) -> float:
    """Seconds into the run when step ``onset`` began."""
    return float(elapsed.get(onset - 1, 0.0)) if onset > 0 else 0.0


def _identity(name: str, status: dict) -> dict:
    """Role, scope and source of a detector: as the run recorded them, else as installed now."""
    if "role" in status:
        scope = status.get("scope") or (detector_class(name).scope if name in DETECTORS
                                        else "generic")
        return {"role": status["role"], "scope": scope, "distribution": status["distribution"],
                "version": status["version"]}
    if name in DETECTORS:
        distribution, version = DETECTORS.provider(name)
        return {"role": role_of(name), "scope": detector_class(name).scope,
                "distribution": distribution, "version": version}
    return {"role": "heuristic", "scope": "generic", "distribution": "unknown", "version": ""}


def run_outcomes(path: Path, summary: dict | None = None) -> list[dict]:
    """One row per detector that watched the run stored at ``path`` (its ``summary``, when
    read already)."""
    summary = summary or summary_with_setup(path)
    alarms = store.read_alarms(path)
    elapsed = pd.Series(dtype=float)
    if not alarms.empty:
        trace = store.read_trace(path)
        if "elapsed_s" in trace.columns:
            elapsed = trace.set_index("step")["elapsed_s"]
    return judge_run(summary, alarms, elapsed)


def is_unproven(summary: dict) -> bool:
    """Whether the run's scenario is unproven: as its scenario file says now, so that a mark
    added (or taken off) after a sweep takes effect when the sweep is scored again; as the run
    recorded it where the scenario is not installed here (a plug-in's, another checkout's)."""
    if not summary.get("bug"):
        return False
    scenario = registry().get(summary["scenario"])
    if scenario is None:
        return bool(summary.get("unproven", summary.get("latent")))
    return bool(scenario.unproven)


def outcome_of(role: str, step: int | None, onset: int) -> str:
    """A detector's outcome on a run of ``role`` whose first alarm is at ``step`` (None: no
    alarm) and whose bug starts at ``onset``."""
    if step is not None and step < onset:
        return "early"
    if role == "buggy":
        return "miss" if step is None else "hit"
    return "quiet" if step is None else "false_alarm"


def judge_run(summary: dict, alarms: pd.DataFrame, elapsed: pd.Series) -> list[dict]:
    """One row per detector in ``summary["detectors"]``: its outcome on the run that
    ``summary`` describes, from its ``alarms`` (``store.ALARM_COLUMNS``); ``elapsed``: the
    run's seconds at the end of each step, by step (empty: no delays in seconds)."""
    role = run_role(summary)
    onset = int(summary.get("onset") or 0)
    # the symptom's first step, where a practitioner can first see it: the first step whose
    # loss or gradients hold a non-finite value (None for runs that stay finite)
    symptom = summary.get("first_nonfinite_step")
    rows = []
    for name, status in (summary.get("detectors") or {}).items():
        mine = alarms[alarms["detector"] == name].sort_values("step", kind="stable")
        first = mine.iloc[0] if len(mine) else None
        step = int(first["step"]) if first is not None else None
        outcome = outcome_of(role, step, onset)
        hit = outcome == "hit"
        rows.append({
            "detector": name, **_identity(name, status), "scenario": summary["scenario"],
            "model": summary.get("model"), "seed": summary["seed"], "run_role": role,
            "clean": role != "buggy", "bug": summary.get("bug"),
            "category": summary.get("category"), "loud": bool(summary.get("loud")),
            "unproven": is_unproven(summary), "onset": onset,
            "run_outcome": summary.get("outcome"), "steps": summary.get("steps_completed"),
            # a number: an event (a crash, a hang, a NaN) counts as 1 or 0, so the column keeps
            # one type whichever run comes first
            "symptom_value": (None if summary.get("symptom_value") is None
                              else float(summary["symptom_value"])),
            "outcome": outcome, "alarm_step": step,
            "alarm_category": first["category"] if first is not None else None,
            "delay_steps": step - onset if hit else None,
            "delay_after_symptom_steps": step - symptom if hit and symptom is not None else None,
            "delay_s": (float(elapsed.get(step, math.nan)) - _onset_time(elapsed, onset))
            if hit and len(elapsed) else None,
            "diagnosed": (first["category"] == summary.get("category")) if hit else None,
            "detector_error": status.get("error"), "release": summary.get("release"),
            "key": summary.get("key"),
            "scored": status.get("scored", IN_PROCESS),
            "setup_digest": summary.get("setup_digest"),
            "trace_digest": summary.get("trace_digest"),
            "honeypot": bool(summary.get("honeypot")),
        })
    return rows


def outcomes(sweep_dir: Path) -> pd.DataFrame:
    """Per (detector, run) outcomes of every complete run in a sweep folder; runs of different
    code (:func:`one_code`) are not scored together. The sealed detectors' rows
    (``sealed_outcomes.parquet``, :mod:`bugzoo.judge.sealed`) join those of runs whose trace
    they were scored on; a row of a run made again since is left out."""
    rows, traces = [], set()
    for path in store.iter_runs(sweep_dir):
        summary = summary_with_setup(path)
        traces.add((summary["scenario"], summary["seed"], run_role(summary),
                    summary.get("trace_digest")))
        rows += run_outcomes(path, summary)
    sealed = store.read_sealed(sweep_dir)
    if sealed is not None and len(sealed):
        scored_on = list(zip(sealed["scenario"], sealed["seed"], sealed["run_role"],
                             sealed["trace_digest"], strict=True))
        sealed = sealed[[key in traces for key in scored_on]]
        rows += sealed.replace({np.nan: None}).to_dict("records")
    if not rows:
        raise UsageError(f"no complete runs under {sweep_dir}")
    table = pd.DataFrame(rows)
    one_code(table, sweep_dir)
    return table


SETUP_READER = "setup_reader"  # the visible board's floor row, derived from stored digests


def setup_reader_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Outcome rows of the strategy that detects nothing but reads the setup: an alarm at step
    0 whenever a run's setup digest differs from its model's default setup, which it takes to
    be the commonest digest of the model's disarmed twins at that seed (most buggy scenarios
    train on their model's defaults, and a twin is set up as its clean control). On a headline
    pair both runs look alike at setup, so it scores 0 there by construction; on the bugs
    visible at setup it is that board's floor. Empty when no digests were recorded."""
    if not {"setup_digest", "model", "onset"} <= set(table.columns) or table.empty:
        return table.iloc[:0]
    runs = table.drop_duplicates(["scenario", "seed", "run_role"])
    runs = runs[runs["setup_digest"].notna()]
    twins = runs[runs["run_role"] == "control"]
    # the commonest digest, the first in order among equally common ones
    defaults = (twins.groupby(["model", "seed"])["setup_digest"]
                .agg(lambda d: d.value_counts().sort_index().idxmax()))
    if defaults.empty:  # no twins, so no default to read
        return table.iloc[:0]
    keys = pd.Series(list(zip(runs["model"], runs["seed"], strict=True)), index=runs.index)
    runs = runs.loc[keys.isin(set(defaults.index))]
    differs = runs["setup_digest"] != keys[runs.index].map(defaults)
    steps = [0 if d else None for d in differs]
    outcome = [outcome_of(role, step, int(onset or 0))
               for role, step, onset in zip(runs["run_role"], steps, runs["onset"], strict=True)]
    hit = [o == "hit" for o in outcome]
    return runs.assign(
        detector=SETUP_READER, role="baseline", scope="generic", distribution=OWN_DISTRIBUTION,
        version="", outcome=outcome, alarm_step=steps,
        alarm_category=["unknown" if d else None for d in differs],
        delay_steps=[0 if h else None for h in hit],
        delay_after_symptom_steps=None, delay_s=None,
        diagnosed=[False if h else None for h in hit], detector_error=None,
        scored="derived from stored setup digests")


def visible_at_setup(table: pd.DataFrame) -> pd.Series:
    """Per row, whether it is a buggy run or control of a scenario whose bug shows at setup:
    in some seed, the buggy run's setup digest (:mod:`bugzoo.harness.setup_digest`) differs
    from its control's, so a detector that reads only the setup could tell the two apart. A
    pair with a digest missing (a distributed run, runs of an older release) counts as
    not visible."""
    paired = table["run_role"] != "clean"
    if "setup_digest" not in table:
        return pd.Series(False, index=table.index)
    runs = table[paired].drop_duplicates(["scenario", "seed", "run_role"])
    digests = runs.pivot(index=["scenario", "seed"], columns="run_role", values="setup_digest")
    if not {"buggy", "control"} <= set(digests.columns):
        return pd.Series(False, index=table.index)
    differs = (digests["buggy"].notna() & digests["control"].notna()
               & (digests["buggy"] != digests["control"]))
    visible = set(differs[differs].index.get_level_values("scenario"))
    return paired & table["scenario"].isin(visible)


def one_code(table: pd.DataFrame, where: Path | str) -> None:
    """Refuse a table where one scenario's runs were made by different code: each run's key
    (:func:`bugzoo.release.scenario_key`) says what made it, and the runs of a pair and of its
    seeds must agree; a run stored before runs recorded keys counts by its release digest."""
    made_by = table["key"].fillna("release " + table["release"].fillna("unstamped")) if (
        "key" in table) else "release " + table["release"].fillna("unstamped")
    codes = pd.DataFrame({"scenario": table["scenario"], "made_by": made_by}).drop_duplicates()
    mixed = codes[codes["scenario"].duplicated(keep=False)]
    if len(mixed):
        scenario = mixed["scenario"].iloc[0]
        keys = ", ".join(sorted(mixed.loc[mixed["scenario"] == scenario, "made_by"]))
        raise UsageError(f"runs of {scenario} in {where} were made by different code ({keys}): "
                         "score each code's runs apart, or run the scenario again")


# ----------------------------------------------------------------------------- suites
def suite_outcomes(table: pd.DataFrame, name: str, members: set[str]) -> pd.DataFrame:
    """A suite as one detector: per run, the first alarm of any member counts. Its diagnosis
    is the category that member names; members that alarm at the same first step and name
    different categories make it ambiguous, which counts as a wrong diagnosis."""
    keys = ["scenario", "seed", "run_role"]
    rows = table[table["detector"].isin(members)].reset_index(drop=True)
    alarmed = rows["alarm_step"].notna()
    # per run, the member row that counts: the first to alarm (the first listed among those
    # alarming at that step), else the run's first row
    ordered = rows.assign(_quiet=~alarmed, _order=range(len(rows))).sort_values(
        [*keys, "_quiet", "alarm_step", "_order"], kind="stable")
    suite = ordered.drop_duplicates(keys).set_index(keys)
    first_step = rows[alarmed].groupby(keys)["alarm_step"].transform("min")
    at_first = rows[alarmed][rows.loc[alarmed, "alarm_step"] == first_step]
    named = at_first.groupby(keys)["alarm_category"].nunique()
    ambiguous = named[named > 1].index
    suite.loc[suite.index.isin(ambiguous), "alarm_category"] = AMBIGUOUS
    hit = suite["outcome"] == "hit"
    suite.loc[hit, "diagnosed"] = suite.loc[hit, "alarm_category"] == suite.loc[hit, "category"]
    errors = rows["detector_error"].notna().groupby([rows[k] for k in keys]).any()
    suite["version"] = rows.drop_duplicates(keys).set_index(keys)["version"]
    suite["detector_error"] = np.where(errors.reindex(suite.index), "member error", None)
    suite = suite.assign(detector=name, role="suite", scope="suite",
                         distribution=OWN_DISTRIBUTION)
    if "scored" in rows:  # members scored both ways make a suite of both
        ways = sorted(rows["scored"].dropna().unique())
        suite["scored"] = ways[0] if len(ways) == 1 else " + ".join(ways)
    return suite.reset_index().drop(columns=["_quiet", "_order"])[list(table.columns)]


def form_suites(identities: dict[str, tuple[str, str, str, bool]]) -> dict[str, list[str]]:
    """The suites that detectors given as ``name -> (role, scope, distribution, sealed)``
    form: for each of ``SUITES``, bugzoo's own detectors of its roles and scopes (scored
    sealed, where it says so), when there are two or more of them and they are not the
    members of a suite already formed."""
    suites: dict[str, list[str]] = {}
    for name, (roles, scopes, sealed_only) in SUITES.items():
        members = sorted(d for d, (role, scope, dist, sealed) in identities.items()
                         if dist == OWN_DISTRIBUTION and role in roles and scope in scopes
                         and (sealed or not sealed_only))
        if len(members) > 1 and members not in suites.values():
            suites[name] = members
    return suites


def suite_members(detectors: list[str]) -> dict[str, list[str]]:
    """The suites that installed ``detectors`` form in a training process, where no detector
    is scored sealed (see :func:`form_suites`)."""
    return form_suites({d: (role_of(d), detector_class(d).scope, DETECTORS.provider(d)[0],
                            False) for d in detectors})


def with_suites(table: pd.DataFrame, label: str = "") -> pd.DataFrame:
    """``table`` plus a row per run for each suite its detectors form, each named with
    ``label`` after it when the suite is not whole (``suite: built-ins (replayable)``). A table
    that holds suite rows already is returned as it is, so each board may ask for them."""
    if (table["role"] == "suite").any():
        return table
    identities = table.assign(
        sealed=scored_sealed(table["scored"]) if "scored" in table else False).groupby("detector")[["role", "scope", "distribution", "sealed"]].first()
    suites = form_suites({d: (r.role, r.scope, r.distribution, bool(r.sealed))
                          for d, r in identities.iterrows()})
    return pd.concat([table, *(suite_outcomes(table, f"{name}{label}", set(members))
                               for name, members in suites.items())], ignore_index=True)


RUN_KEYS = ["scenario", "seed", "run_role"]  # one run of a sweep, in an outcome table


def detector_failures(table: pd.DataFrame) -> pd.DataFrame:
    """Per detector that failed on some run of the outcome ``table`` (suites aside): on how
    many runs (``failed_runs``) and its first error (``first_error``)."""
    failed = table[table["detector_error"].notna() & (table["role"] != "suite")]
    runs = failed.drop_duplicates(["detector", *RUN_KEYS])
    return runs.groupby("detector")["detector_error"].agg(failed_runs="count", first_error="first")
