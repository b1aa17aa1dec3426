"""``bugzoo results tools``: ``results/tools.md``, the field's debugging tools on bugzoo-bench
Lite beside bugzoo's suite on the same runs.

The tools sweep is a Lite bench with the tools named (``bugzoo bench --detectors`` and
:data:`SWEPT`, ``--sweep tools``), scored by the board's rules. This command keeps its tables in
``results/tools/`` and writes the page from them, so the page is remade from ``results/``
alone (``tests/test_tools_page.py``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pandas as pd

from bugzoo.detector_registry import unavailable
from bugzoo.errors import ArgumentParser, UsageError
from bugzoo.harness import store
from bugzoo.judge.outcomes import RUN_KEYS, detector_failures
from bugzoo.judge.scoring import _fmt
from bugzoo.judge.tables import markdown
from bugzoo.judge.templates import render

SWEEP = Path("results/runs/tools")
# what the tools sweep watches: the default suite (to stand beside) and every tool but anomaly,
# which needs runs of its own (Tool.left_out)
SWEPT = "default cockpit lightning_spikes hf_overflow torch_grad_norm"
TABLES = "tools"  # results/tools/: the sweep's scored tables, what the page is made of
KEPT = ("leaderboard.csv", "leaderboard_categories.csv", store.SPLIT_FILE, store.SWEEP_TIME,
        store.SWEEP_COMMAND, "overhead.csv")
SUITE = "suite: built-ins"
LIBRARIES = "libraries.csv"  # each tool's library and the version installed beside the sweep
UNION = "suite: built-ins + tools"  # alarms where any built-in or tool alarms


@dataclass(frozen=True)
class Tool:
    """A tool as its own documentation presents it: the library it ships in, and what it says
    it catches."""

    library: str
    claim: str
    left_out: str = ""  # why the tools sweep does not run it, where it could


TOOLS = {
    "nan_hooks": Tool("torch", "the module whose forward output first holds a NaN (the "
                      "reference notes' recipe: a forward hook on every module)"),
    "anomaly": Tool("torch", "the backward op that first returns NaN, with its forward "
                    "traceback (`torch.autograd.detect_anomaly`)",
                    "it needs runs of its own, several times slower than the bare loop "
                    "(`results/perf/overhead.md`): a second run of every scenario at that cost; "
                    "`bugzoo bench --detectors anomaly` runs it"),
    "torch_grad_norm": Tool("torch", "a NaN or infinite total gradient norm before a step "
                            "(`clip_grad_norm_(..., error_if_nonfinite=True)`)"),
    "lightning_spikes": Tool("lightning", "loss spikes against a running mean, and non-finite "
                             "losses (`SpikeDetection`)"),
    "lightning_finite": Tool("lightning", "NaN or infinite parameters "
                             "(`utilities.finite_checks.detect_nan_parameters`)"),
    "hf_overflow": Tool("transformers", "the first inf or NaN in any module's weights, inputs "
                        "or outputs, with the frames before it "
                        "(`debug=\"underflow_overflow\"`)"),
    "cockpit": Tool("cockpit-for-pytorch", "training states read off gradient statistics: "
                    "a learning rate too large or too small, noisy or vanishing gradients"),
}


def tool_version(name: str) -> str:
    """The installed version of the library the tool ``name`` ships in, or "not installed"."""
    try:
        return metadata.version(TOOLS[name].library)
    except metadata.PackageNotFoundError:
        return "not installed"


def keep_tables(sweep: Path, out: Path) -> Path:
    """Copy a scored tools sweep's tables into ``out/tools/`` (with its outcomes as Parquet),
    and record beside them each tool's library as installed here, or why it cannot run."""
    if not (sweep / "leaderboard.csv").is_file():
        raise UsageError(f"{sweep} holds no scored sweep: run `bugzoo bench --detectors "
                         f"{SWEPT} --sweep {sweep.name}` first (or `bugzoo score {sweep}`)")
    kept = out / TABLES
    kept.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        if (sweep / name).is_file():
            shutil.copyfile(sweep / name, kept / name)
    pd.read_csv(sweep / "outcomes.csv", low_memory=False).to_parquet(kept / "outcomes.parquet",
                                                                      index=False)
    pd.DataFrame([{"tool": name, "library": tool.library, "version": tool_version(name),
                   "unavailable": unavailable(name) or ""}
                  for name, tool in TOOLS.items()]).to_csv(kept / LIBRARIES, index=False)
    return kept


def _interval(row: pd.Series, key: str) -> str:
    return _fmt(row[key], row[f"{key}_lo"], row[f"{key}_hi"])


def tools_page(kept: Path, command: str) -> str:
    """``tools.md`` from the tables in ``kept`` (``results/tools/``); ``command`` wrote them
    there, after the commands that made the sweep (which ``kept`` records)."""
    made_by = store.read_sweep_command(kept)
    command = f"{made_by}` then `{command}" if made_by else command
    board = pd.read_csv(kept / "leaderboard.csv").set_index("detector")
    outcomes = pd.read_parquet(kept / "outcomes.parquet")
    categories = pd.read_csv(kept / "leaderboard_categories.csv")
    errors = detector_failures(outcomes)
    libraries = pd.read_csv(kept / LIBRARIES, keep_default_na=False).set_index("tool")
    versions = libraries["version"]
    runs = outcomes.drop_duplicates(RUN_KEYS)
    tools = [n for n in TOOLS if n in board.index]
    suites = [n for n in (SUITE, UNION) if n in board.index]
    rows = [{"tool": f"`{n}`" if n in TOOLS else n,
             "library": f"{TOOLS[n].library} {versions[n]}" if n in TOOLS else "bugzoo",
             "scored": board.loc[n, "scored"],
             "its docs say it catches": TOOLS[n].claim if n in TOOLS else "",
             **{c: _interval(board.loc[n], c)
                for c in ("score", "recall", "matched_false_alarm_rate",
                          "healthy_false_alarm_rate", "honeypot_score")},
             "overhead": _fmt(board.loc[n, "overhead"]),
             "failed on": (f"{errors.loc[n, 'failed_runs']} of {len(runs)} runs: "
                           f"`{errors.loc[n, 'first_error']}`" if n in errors.index else "")}
            for n in [*tools, *suites]]
    hits = categories[categories["detector"].isin([*tools, SUITE])].assign(
        recall=lambda t: [_fmt(v, lo, hi) for v, lo, hi in zip(t.recall, t.recall_lo,
                                                                t.recall_hi, strict=True)])
    by_category = hits.pivot(index="category", columns="detector", values="recall")
    by_category = by_category[[c for c in [*tools, SUITE] if c in by_category]].reset_index()
    silent = board.loc[SUITE] if SUITE in board.index else None
    missing = [{"tool": f"`{n}`", "library": TOOLS[n].library,
                "why": libraries.loc[n, "unavailable"] or TOOLS[n].left_out
                or "not in this sweep"}
               for n in TOOLS if n not in board.index]
    best = max((round(board.loc[n, "score"], 2) for n in tools), default=None)
    strongest = [n for n in tools if round(board.loc[n, "score"], 2) == best]
    timed = (pd.read_csv(kept / store.SWEEP_TIME) if (kept / store.SWEEP_TIME).is_file()
             else pd.DataFrame(columns=["wall_s", "runs_made", "workers"]))
    noisiest = max(tools, key=lambda n: board.loc[n, "matched_false_alarm_rate"], default=None)
    return render(
        "tools", command=command, stamp=store.sweep_stamp(kept) or "Runs of unrecorded versions",
        bugs=int(silent["bugs"]) if silent is not None else 0,
        pairs=int(silent["pairs"]) if silent is not None else 0,
        healthy=int(silent["clean_runs"]) if silent is not None else 0,
        seeds=len((store.read_split(kept) or {}).get("seeds", [])),
        swept=(f"{timed['runs_made'].sum()} runs in {timed['wall_s'].sum() / 60:.0f} min on "
               f"{timed['workers'].max()} workers" if len(timed) else ""),
        table=markdown(pd.DataFrame(rows)), by_category=markdown(by_category),
        missing=markdown(pd.DataFrame(missing)) if missing else "",
        strongest=[f"`{n}` {_interval(board.loc[n], 'score')}" for n in strongest],
        noisiest=noisiest, noisiest_rate=_fmt(board.loc[noisiest, "matched_false_alarm_rate"])
        if noisiest else "",
        union=_interval(board.loc[UNION], "score") if UNION in board.index else "",
        suite_score=_interval(silent, "score") if silent is not None else "")


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results tools", description=__doc__.splitlines()[0])
    p.add_argument("--sweep", type=Path, default=SWEEP,
                   help=f"the scored tools sweep (default: {SWEEP})")
    p.add_argument("--out", type=Path, default=Path("results"),
                   help="where tools.md and tools/ go (default: results)")
    args = p.parse_args(argv)
    kept = keep_tables(args.sweep, args.out)
    page = tools_page(kept, "bugzoo results tools"
                      + (f" --sweep {args.sweep}" if args.sweep != SWEEP else ""))
    (args.out / "tools.md").write_text(page)
    print(f"{args.out / 'tools.md'}: {page.count(chr(10))} lines")
    return 0

