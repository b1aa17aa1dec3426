"""Spot-the-bug cards: ``cards.html`` of ``bugzoo report``, with nothing that names the answer.

A card shows what a practitioner observes (the symptom in their words, and curves of two runs
named A and B, one of them the buggy run, drawn afresh from ``results/curves/<bug>.parquet``
with no bug id, title, scenario or command on them) and, on request, the buggy code without
its comments. The answer (bug, title, fix, explanation) is in the page only scrambled (XOR
with a key of the page's, then base64), and unscrambled when the card is revealed: a speed bump
against a glance at the source, not security, since the key is in the page. Cards are shuffled
with a seed, which also draws the key and which run is A on each card, so neither the order
nor the colours tell.
"""

from __future__ import annotations

import base64
import html
import random
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from bugzoo.bugs import Bug, flat_id
from bugzoo.judge.curves import LABELS
from bugzoo.teach.catalogue import observed

# the trace quantities a card may plot, in the order its panels show them
QUANTITIES = ("loss", "val_acc", "grad_norm", "val_loss", "heap_mb", "data_s", "param_norm")
KEY_BYTES = 16
SCRIPT = """
const KEY = Uint8Array.from(atob(document.getElementById('cards').dataset.key),
                            c => c.charCodeAt(0));
function reveal(button) {
  const answer = button.parentElement.querySelector('.answer');
  const bytes = Uint8Array.from(atob(answer.dataset.answer),
                                (c, i) => c.charCodeAt(0) ^ KEY[i % KEY.length]);
  answer.innerHTML = new TextDecoder().decode(bytes);
  answer.classList.remove('hidden');
  button.classList.add('hidden');
}
"""


def esc(text: object) -> str:
    return html.escape(str(text))


def card_figure(bands: pd.DataFrame, png: Path, buggy_is_a: bool) -> bool:
    """One scenario's curves, as a card shows them, into ``png``: runs A and B, panels titled
    by what they plot. False where the bands hold no trace quantity to draw."""
    scenario = sorted(bands["scenario"].unique())[0]
    mine = bands[(bands["scenario"] == scenario) & bands["step"].notna()
                 & bands["quantity"].isin(QUANTITIES)]
    quantities = [q for q in QUANTITIES if q in set(mine["quantity"])]
    if not quantities:
        return False
    names = ({"buggy": "run A", "clean": "run B"} if buggy_is_a
             else {"clean": "run A", "buggy": "run B"})
    fig = Figure(figsize=(3.6 * len(quantities), 3.0))
    axes = fig.subplots(1, len(quantities), squeeze=False)[0]
    for quantity, ax in zip(quantities, axes, strict=True):
        for variant, name in sorted(names.items(), key=lambda item: item[1]):
            band = mine[(mine["quantity"] == quantity) & (mine["variant"] == variant)]
            ax.plot(band["step"], band["median"], label=name, lw=1.5)
            ax.fill_between(band["step"], band["min"], band["max"], alpha=0.2)
        ax.set_title(LABELS.get(quantity, quantity), fontsize=10)
        ax.set_xlabel("step", fontsize=9)
        ax.tick_params(labelsize=8)
    axes[0].legend(fontsize=8)
    ended = stopped(mine, names["buggy"])
    if ended:
        axes[0].text(0.5, 0.5, ended, transform=axes[0].transAxes, ha="center", va="center",
                     fontsize=9, bbox={"facecolor": "white", "edgecolor": "0.5"})
    fig.suptitle("Two runs of one model: median and min-max over seeds", fontsize=11)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=80)
    return True


def stopped(bands: pd.DataFrame, name: str) -> str | None:
    """What a practitioner sees of a run that stopped before the other (it crashed or hung, or
    ended early): where its curves end. ``name``: the buggy run's name on the card."""
    last = bands.groupby("variant")["step"].max()
    if "buggy" not in last:
        return f"{name} left no curve:\nit stopped before its first step"
    if last["buggy"] < last.get("clean", last["buggy"]):
        return f"{name} stopped at step {int(last['buggy'])}"
    return None


def encoded(text: str, key: bytes) -> str:
    """``text`` as the page holds an answer: its UTF-8 bytes XOR ``key`` (repeated), in base64."""
    data = text.encode()
    return base64.b64encode(bytes(b ^ key[i % len(key)] for i, b in enumerate(data))).decode()


def card(bug: Bug, figure: str | None, key: bytes) -> str:
    answer = (f"<p><b>{esc(bug.id)}</b>: {esc(bug.title)}</p><p>{esc(bug.symptom)}</p>"
              f"<div class=fixed><pre>{esc(bug.fixed)}</pre></div><p>{esc(bug.explanation)}</p>")
    return (f"<div class=card data-models='{esc(' '.join(bug.models))}'>"
            f"<p><b>Observed:</b> {esc(observed(bug))}</p>"
            + (f"<p><img src='{esc(figure)}' alt='curves of two runs, one of them wrong'></p>"
               if figure else "")
            + "<details><summary>show the code</summary><p>What is wrong in this code?</p>"
            f"<pre>{esc(bug.buggy_puzzle)}</pre></details>"
            "<button class=reveal onclick='reveal(this)'>Reveal</button>"
            f"<div class='answer hidden' data-answer='{encoded(answer, key)}'></div></div>")


def cards_page(bugs: list[Bug], results: Path, out: Path, seed: int) -> str:
    """The cards of ``bugs`` in an order drawn from ``seed``, their figures written under
    ``out/cards/`` (numbered in the card's order), their answers scrambled with a key drawn
    from ``seed``; the page's body."""
    rng = random.Random(seed)
    order = list(bugs)
    rng.shuffle(order)
    key = rng.randbytes(KEY_BYTES)
    parts = []
    for n, bug in enumerate(order, 1):
        bands = results / "curves" / f"{flat_id(bug.id)}.parquet"
        png = out / "cards" / f"{n}.png"
        buggy_is_a = rng.random() < 0.5
        drawn = bands.is_file() and card_figure(pd.read_parquet(bands), png, buggy_is_a)
        parts.append(card(bug, f"cards/{n}.png" if drawn else None, key))
    return ("<p><a href='index.html'>&larr; catalogue</a></p><h1>Spot the bug</h1>"
            f"<p>{len(order)} cards, shuffled (seed {seed}). Each shows what was observed; the "
            "code is a click away, and the answer another. Until then the answers are in this "
            "page's source only scrambled: a speed bump, not security.</p>"
            f"<div id=cards data-key='{base64.b64encode(key).decode()}'>{''.join(parts)}</div>")
