"""A task's scripts: an exported pair (:mod:`bugzoo.teach.export`) made blind and seedable.

Both scripts get the same neutral header, take their seed from the command line
(``python train.py 3``) and end by printing the validation loss and accuracy. Comments the bug's
patch brought in are removed, since they tell its story; the template's own comments stay, the
same in both scripts.
"""

from __future__ import annotations

import ast
import importlib
import io
import tokenize

from bugzoo.bugs import get_bug
from bugzoo.scenarios import get_scenario
from bugzoo.teach.export import render

SEED_LINE = "torch.manual_seed(0)"
SEEDED = ("SEED = int(sys.argv[1]) if len(sys.argv) > 1 else 0  # python train.py SEED\n"
          "torch.manual_seed(SEED)")
LAST_LINE = "print(f\"SYMPTOM "
FINAL_PRINT = 'print(f"final validation loss {val_loss:.4f}, accuracy {val_acc:.4f}")\n'


def family(scenario: str):
    """The reproducer module of the scenario's model (its template, data source, description)."""
    return importlib.import_module(f"bugzoo.teach.reproducers.{get_scenario(scenario).model}")


def task_scripts(scenario: str) -> dict[str, str]:
    """The ``buggy`` and ``fixed`` task scripts of an exportable scenario."""
    scripts = render(scenario)
    header = (f'"""Train {family(scenario).DESCRIPTION}.\n\n'
              'Plain PyTorch on the CPU, in seconds: python train.py [SEED]\n"""\n')
    neutral = {variant: seeded(header + _without_docstring(text))
               for variant, text in scripts.items()}
    fixed_lines = set(neutral["fixed"].splitlines())
    return {variant: _without_new_comments(text, fixed_lines)
            for variant, text in neutral.items()}


def _without_docstring(text: str) -> str:
    first = ast.parse(text).body[0]
    return "\n".join(text.splitlines()[first.end_lineno:]) + "\n"


def seeded(text: str) -> str:
    """A reproducer that takes its seed from the command line and ends by printing its
    validation loss and accuracy (instead of its SYMPTOM line)."""
    if text.count(SEED_LINE) != 1 or text.count(LAST_LINE) != 1:
        raise RuntimeError("a reproducer without one seed line and one SYMPTOM line")
    text = text.replace("import math\n", "import math\nimport sys\n", 1)
    last = text.index(LAST_LINE)
    return text[:last].replace(SEED_LINE, SEEDED) + FINAL_PRINT


def _without_new_comments(text: str, kept: set[str]) -> str:
    """``text`` without the comments on lines that are not in ``kept`` (a comment-only line
    goes whole)."""
    lines = text.splitlines(keepends=True)
    cuts = {token.start[0] - 1: token.start[1]
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
            if token.type == tokenize.COMMENT and lines[token.start[0] - 1].rstrip("\n")
            not in kept}
    out = []
    for number, line in enumerate(lines):
        if number not in cuts:
            out.append(line)
        elif code := line[:cuts[number]].rstrip():
            out.append(code + "\n")
    return "".join(out)


def settings(scenario: str) -> dict[str, object]:
    """The template settings both task scripts of ``scenario`` share (steps, data size, spread)."""
    spec = get_scenario(scenario)
    return {**family(scenario).DEFAULTS, **get_bug(spec.bug).reproducers[spec.model].settings}
