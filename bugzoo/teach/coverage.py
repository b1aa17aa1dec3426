"""``bugzoo results coverage``: which leaves of the published fault taxonomies the catalogue plants.

Every bug declares the leaves it plants (``Bug.taxonomy``, keys of :mod:`bugzoo.taxonomy`),
literally or partly. This tallies the declarations per source and per Humbatova branch, and
lists each leaf with the bugs that plant it, into ``results/coverage.md``. Only in-scope leaves
count; the distributed extension is shown in brackets.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from bugzoo.bugs import Bug, list_bugs
from bugzoo.commands import command_line
from bugzoo.errors import ArgumentParser
from bugzoo.judge.tables import markdown
from bugzoo.taxonomy import LEAVES, LITERAL, PARTIAL, SOURCES

COVERAGE_FILE = "coverage.md"
TOP_FREQUENT = 10  # Jahangirova et al.'s most frequent fault types


def leaf_table(bugs: Iterable[Bug]) -> pd.DataFrame:
    """One row per leaf: its facts, the bugs that plant it literally, those that plant it in
    part (each with how it differs), and its status: literal, partial or uncovered."""
    literal: dict[str, list[str]] = {leaf.key: [] for leaf in LEAVES}
    partial: dict[str, list[str]] = {leaf.key: [] for leaf in LEAVES}
    for bug in bugs:
        for key, value in bug.taxonomy.items():
            if value == LITERAL:
                literal[key].append(bug.id)
            else:
                partial[key].append(f"{bug.id} ({value[len(PARTIAL):]})")
    return pd.DataFrame([{
        "key": leaf.key, "source": leaf.source, "group": leaf.group, "name": leaf.name,
        "scope": leaf.scope, "faults": leaf.faults, "folded": leaf.folded,
        "literal": literal[leaf.key], "partial": partial[leaf.key],
        "status": "literal" if literal[leaf.key] else "partial" if partial[leaf.key]
        else "uncovered",
    } for leaf in LEAVES])


def fold(table: pd.DataFrame) -> pd.DataFrame:
    """Humbatova's preprocessing examples folded into their two parent leaves: a parent is
    literal when any example is, else partial when any example is."""
    rank = {"literal": 2, "partial": 1, "uncovered": 0}
    grouped = table.assign(rank=table.status.map(rank)).groupby("folded", sort=False)
    folded = grouped.agg(source=("source", "first"), group=("group", "first"),
                         scope=("scope", "first"), rank=("rank", "max")).reset_index()
    return folded.assign(status=folded["rank"].map({v: k for k, v in rank.items()}))


def tally(rows: pd.DataFrame, label: str) -> dict:
    """Counts of one set of leaves: in scope (distributed in brackets), literal, partial,
    uncovered."""
    inside, extension = rows[rows.scope == "in"], rows[rows.scope == "distributed"]

    def count(status: str) -> str:
        n, extra = int((inside.status == status).sum()), int((extension.status == status).sum())
        return f"{n} (+{extra})" if extra else str(n)

    literal = int((inside.status == "literal").sum())
    return {"source": label, "keys": len(rows),
            "in scope": f"{len(inside)} (+{len(extension)})" if len(extension) else len(inside),
            "literal": count("literal"), "partial": count("partial"),
            "uncovered": count("uncovered"),
            "literal share": f"{literal / len(inside):.0%}" if len(inside) else ""}


def source_tallies(table: pd.DataFrame) -> pd.DataFrame:
    """One row per source, Humbatova both ways, AUTOTRAINER's problems apart from its labels,
    Jahangirova's most frequent types apart from all of them."""
    by = {prefix: table[table.source == prefix] for prefix in "HTDAJL"}
    frequent = by["J"].dropna(subset=["faults"]).nlargest(TOP_FREQUENT, "faults")
    return pd.DataFrame([
        tally(by["H"], "Humbatova et al., preprocessing examples one by one"),
        tally(fold(by["H"]), "Humbatova et al., preprocessing folded into its 2 leaves"),
        tally(by["T"], "TrainCheck, named silent errors"),
        tally(by["D"], "DeepFD, fault types"),
        tally(by["A"][by["A"].group == "problem"], "AUTOTRAINER, training problems"),
        tally(by["A"], "AUTOTRAINER, labels in its current code"),
        tally(frequent, f"Jahangirova et al., the {TOP_FREQUENT} most frequent types"),
        tally(by["J"].dropna(subset=["faults"]), "Jahangirova et al., types with 3+ faults"),
        tally(by["J"], "Jahangirova et al., every code"),
        tally(by["L"], "LLM-era incidents"),
    ])


def branch_tallies(table: pd.DataFrame) -> pd.DataFrame:
    """Humbatova's five branches, in scope only: literal / partial / uncovered, both ways."""
    humbatova = table[(table.source == "H") & (table.scope == "in")]
    rows = []
    for branch, leaves in humbatova.groupby("group", sort=False):
        folded = fold(leaves)
        rows.append({"branch": branch, **{
            f"{way}": " / ".join(str(int((rows_.status == s).sum()))
                                 for s in ("literal", "partial", "uncovered"))
            + f" of {len(rows_)}"
            for way, rows_ in (("one by one", leaves), ("folded", folded))}})
    return pd.DataFrame(rows)


def leaves_section(table: pd.DataFrame, prefix: str) -> list[str]:
    """One source's leaves: key, name, scope, status and the bugs behind it."""
    rows = table[table.source == prefix]
    shown = pd.DataFrame({
        "key": "`" + rows.key + "`",
        "leaf": rows.name + rows.faults.map(lambda n: f" ({n:.0f} faults)" if n == n else ""),
        "scope": rows.scope,
        "bugzoo": [", ".join([f"`{b}`" for b in lit] + [f"partial: {p}" for p in part]) or "—"
                   for lit, part in zip(rows.literal, rows.partial, strict=True)],
    })
    source = next(s for s in SOURCES if s.prefix == prefix)
    return [f"### {source.name}", "", source.citation + ".", "", markdown(shown), ""]


def coverage_page(bugs: list[Bug], command: str) -> str:
    table = leaf_table(bugs)
    lines = [
        "# Coverage of published fault taxonomies", "",
        f"Regenerate with `{command}`. Each of the {len(bugs)} bugs declares the leaves of "
        "published catalogues of real training faults it plants (`Bug.taxonomy`): *literal* "
        "when it plants the mechanism as the source describes it, *partial* when it plants a "
        "related mechanism, a narrow sub-form or the same effect through another cause, with "
        "how it differs. A leaf counts as planted whatever effect size the bug shows "
        "(`validity.md` says which symptoms are proven). Counts are over in-scope leaves; the "
        "distributed extension (faults across processes) is in brackets.", "",
        "## By source", "", markdown(source_tallies(table)), "",
        "## Humbatova et al. by branch", "",
        "In scope, literal / partial / uncovered.", "", markdown(branch_tallies(table)), "",
        "## Every leaf", "",
    ]
    for source in SOURCES:
        lines += leaves_section(table, source.prefix)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    p = ArgumentParser(prog="bugzoo results coverage", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("results"),
                   help=f"folder for {COVERAGE_FILE} (default: results)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / COVERAGE_FILE
    path.write_text(coverage_page(list_bugs(), command_line("results coverage", argv)))
    print(f"wrote {path}")
    return 0
