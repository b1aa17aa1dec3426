"""Small helpers for the Markdown tables written under results/."""

from __future__ import annotations

import pandas as pd


def markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of every cell's ``str``."""
    header = [str(c) for c in table.columns]
    rows = [[str(v) for v in row] for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
