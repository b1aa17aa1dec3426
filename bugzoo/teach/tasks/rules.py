"""The ``rules`` solver's knowledge: a diagnosis from alarms, and a table of known fixes.

The diagnosis is the category of the earliest alarm that bugzoo's heuristic detectors raise on
the task's own run (ties: the category most of those alarms name); no alarm, no diagnosis
(``none``). The fixes are textbook repairs of common mistakes, each a regular expression over
the script and its replacement, filed under the category a detector would name. A rule applies
only where its pattern matches; the solver hands in the script with every matching rule of the
diagnosed category applied. The table was written knowing the catalogue's mistakes, so its
result is what a rules approach reaches at best, not a measure of one on unseen bugs.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class Fix:
    """One known repair: ``pattern`` (multiline regex) replaced by ``replacement``, unless the
    script already matches ``unless``."""

    name: str
    pattern: str
    replacement: str
    unless: str = ""

    def apply(self, text: str) -> str:
        if self.unless and re.search(self.unless, text, flags=re.MULTILINE):
            return text
        return re.sub(self.pattern, self.replacement, text, flags=re.MULTILINE)


SOFTMAX_OUTPUT = Fix("logits, not probabilities, out of the model",
                     r"^(\s*)return torch\.softmax\((.*), dim=-?\d+\)$", r"\1return \2")
KNOWN_FIXES: dict[str, tuple[Fix, ...]] = {
    "loss": (
        SOFTMAX_OUTPUT,
        Fix("cross-entropy on logits instead of NLL on log of softmax",
            r"F\.nll_loss\(torch\.log\(torch\.softmax\((\w+), dim=-1\)\), (\w+)\)",
            r"F.cross_entropy(\1, \2)"),
        Fix("cross-entropy instead of NLL on raw logits", r"F\.nll_loss\((\w+), (\w+)\)",
            r"F.cross_entropy(\1, \2)"),
        Fix("cross-entropy instead of MSE on one-hot targets",
            r"F\.mse_loss\((\w+), F\.one_hot\((\w+), \w+\)\.float\(\)\)",
            r"F.cross_entropy(\1, \2)"),
    ),
    "numerics": (
        Fix("log_softmax instead of log of softmax",
            r"torch\.log\(torch\.softmax\((\w+), dim=(-?\d+)\)\)", r"torch.log_softmax(\1, dim=\2)"),
    ),
    "loop": (
        Fix("clear gradients before each backward pass", r"^(\s*)loss\.backward\(\)$",
            r"\1optimizer.zero_grad()\n\1loss.backward()", unless=r"zero_grad\("),
    ),
    "optim": (
        Fix("a sane learning rate", r"lr=(?:[1-9]\d*(?:\.\d*)?(?:e\d+)?)\b", "lr=LR"),
        Fix("Adam's learning rate with Adam", r"torch\.optim\.SGD\(model\.parameters\(\), "
            r"lr=LR, weight_decay=0\.01\)", "torch.optim.AdamW(model.parameters(), lr=LR, "
            "weight_decay=0.01)"),
        Fix("step the scheduler after the optimizer", r"^(\s*)optimizer\.step\(\)$",
            r"\1optimizer.step()\n\1scheduler.step()", unless=r"scheduler\.step\("),
        Fix("no freezing left over", r"^for \w+ in model\.\w+\.parameters\(\):\n\s+\w+\."
            r"requires_grad = False\n", ""),
    ),
    "model": (
        SOFTMAX_OUTPUT,
        Fix("ReLU, not sigmoid, between hidden layers", r"nn\.Sigmoid\(\)", "nn.ReLU()"),
    ),
    "data": (
        Fix("shuffle the training set every epoch", r"order = torch\.arange\(len\((\w+)\)\)",
            r"order = torch.randperm(len(\1))"),
        Fix("no debugging subset left on",
            r"^(\w+), (\w+) = \1\[:\d+\], \2\[:\d+\]\n", ""),
    ),
}


def diagnose(alarms: list[dict]) -> str:
    """The category of the earliest alarms (the most named among them), or ``none``."""
    if not alarms:
        return "none"
    first = min(alarm["step"] for alarm in alarms)
    named = Counter(a["category"] for a in alarms if a["step"] == first
                    and a["category"] != "unknown")
    return named.most_common(1)[0][0] if named else "none"


def repair(text: str, category: str) -> tuple[str, list[str]]:
    """``text`` with every known fix of ``category`` that matches applied, and their names."""
    applied = []
    for fix in KNOWN_FIXES.get(category, ()):
        fixed = fix.apply(text)
        if fixed != text:
            applied.append(fix.name)
            text = fixed
    return text, applied
