"""bugzoo report: the static catalogue, driven in headless Chromium (Debian's chromium)."""

from __future__ import annotations

import base64
import html
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import answers_shown, named

from bugzoo import versions
from bugzoo.bugs import flat_id, list_bugs
from bugzoo.cli import main
from bugzoo.harness import store
from bugzoo.teach.report import build

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1200,900")


@pytest.fixture
def results(tmp_path) -> Path:
    """A results folder with a validity table, one curve, a leaderboard and a scored sweep."""
    root = tmp_path / "results"
    (root / "curves").mkdir(parents=True)
    pd.DataFrame([{"scenario": "mlp-double_softmax", "bug": "double_softmax", "model": "mlp",
                   "metric": "final_val_loss", "p_value": 0.004, "effect": 0.7,
                   "valid": True}]).to_csv(root / "validity.csv", index=False)
    shutil.copyfile(Path(__file__).parent.parent / "bugzoo" / "py.typed",
                    root / "curves" / "double_softmax.png")  # any file: only copied and linked
    pd.DataFrame([{"detector": "loss_plateau", "role": "builtin", "score": 0.4, "score_lo": 0.3,
                   "score_hi": 0.5, "recall": 0.5, "matched_false_alarm_rate": 0.1,
                   "healthy_false_alarm_rate": 0.0, "median_delay_steps": 120.0}]).to_csv(
        root / "leaderboard.csv", index=False)
    alarms = pd.DataFrame([{"detector": "ce_probabilities", "step": 3, "symptom": "probs",
                            "category": "loss", "message": "outputs sum to 1"}])
    store.write_run(store.run_dir(root / "runs", "bench", "mlp-double_softmax", 0), {},
                    pd.DataFrame({"step": [0, 1, 2, 3], "elapsed_s": [0.1, 0.2, 0.3, 0.4]}),
                    alarms, {"scenario": "mlp-double_softmax", "seed": 0,
                             "bug": "double_softmax", "category": "loss", "onset": 0,
                             "detectors": {"ce_probabilities": {}, "nonfinite": {}}})
    return root


def test_pages_hold_the_catalogue(results):
    index = build(results, results / "report", results / "runs" / "bench")
    text = index.read_text()
    bugs = list_bugs()
    assert text.count("class=bug ") == len(bugs) and "href='cards.html'" in text
    assert (results / "report" / "cards.html").read_text().count("class=card ") == len(bugs)
    assert "http://" not in text and "https://" not in text  # no CDN, no network
    assert f"Made with {versions()}" in text
    assert "<h2>Leaderboard</h2>" in text and "loss_plateau" in text
    page = (results / "report" / "bugs" / "double_softmax.html").read_text()
    assert "../curves/double_softmax.png" in page and (results / "report" / "curves" /
                                                         "double_softmax.png").is_file()
    assert "Validity" in page and "0.004" in page
    assert "Detectors that catch it" in page and "ce_probabilities" in page
    assert "nonfinite" in page  # it watched and missed: listed with 0 hits
    other = (results / "report" / "bugs" / "missing_zero_grad.html").read_text()
    assert "Validity" not in other and "Curves" not in other  # absent inputs are left out


def test_report_without_inputs(tmp_path, capsys):
    assert main(["report", "--results", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"bugzoo report: error: no results folder {tmp_path / 'empty'}")
    (tmp_path / "empty").mkdir()
    assert main(["report", "--results", str(tmp_path / "empty")]) == 0
    assert (tmp_path / "empty" / "report" / "index.html").is_file()
    assert "Leaderboard" not in (tmp_path / "empty" / "report" / "index.html").read_text()


@pytest.mark.skipif(not CHROMIUM.exists() or not DRIVER.exists(),
                    reason="needs Debian's chromium and chromium-driver: "
                           "apt-get install -y chromium chromium-driver")
def test_browser_filters_and_reveal(results, tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    index = build(results, results / "report", results / "runs" / "bench")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        driver.get(index.as_uri())
        visible = lambda sel: [e for e in driver.find_elements(By.CSS_SELECTOR, sel)  # noqa: E731
                               if e.is_displayed()]
        everything = len(visible("#catalogue .bug"))
        assert everything == len(list_bugs())
        assert driver.find_element(By.ID, "count").text == str(everything)

        Select(driver.find_element(By.ID, "category")).select_by_visible_text("data")
        data = visible("#catalogue .bug")
        assert len(data) == sum(b.category == "data" for b in list_bugs()) < everything
        assert {e.get_attribute("data-category") for e in data} == {"data"}
        # the lstm runs only some of the data bugs, so the second filter must hide some
        Select(driver.find_element(By.ID, "model")).select_by_visible_text("lstm")
        both = visible("#catalogue .bug")
        assert len(both) == sum(b.category == "data" and "lstm" in b.models
                                for b in list_bugs()) < len(data)
        assert all("lstm" in e.get_attribute("data-models").split() for e in both)
        Select(driver.find_element(By.ID, "category")).select_by_index(0)
        Select(driver.find_element(By.ID, "model")).select_by_index(0)
        assert len(visible("#catalogue .bug")) == everything

        driver.find_element(By.ID, "cards").click()
        card = visible(".card")[0]
        answer = card.find_element(By.CSS_SELECTOR, ".answer")
        assert not answer.is_displayed() and not answer.text
        card.find_element(By.CSS_SELECTOR, "button.reveal").click()
        assert answer.is_displayed()
        assert any(f"{b.id}: {b.title}" in answer.text for b in list_bugs())
        driver.save_screenshot(str(tmp_path / "screenshot.png"))
        assert (tmp_path / "screenshot.png").stat().st_size > 1000

        driver.get((results / "report" / "bugs" / "double_softmax.html").as_uri())
        assert "double_softmax" in driver.title
        errors = [m for m in driver.get_log("browser") if m["level"] == "SEVERE"
                  and "double_softmax.png" not in m["message"]]  # the stand-in PNG is not an image
        assert errors == []
    finally:
        driver.quit()


def revealed(page: str) -> list[str]:
    """Each card's answer, decoded as its Reveal button does: base64, then XOR with the page's
    key."""
    key = base64.b64decode(re.search(r"data-key='([^']*)'", page)[1])
    return [bytes(b ^ key[i % len(key)] for i, b in enumerate(base64.b64decode(a))).decode()
            for a in re.findall(r"data-answer='([^']*)'", page)]


def before_reveal(page: str) -> str:
    """What a student reads of a cards page before pressing Reveal: its text and source, with
    the encoded answers left out and entities decoded."""
    return html.unescape(re.sub(r"data-answer='[^']*'", "", page))


def test_cards_do_not_give_the_answer_away(tmp_path):
    """Before a card is revealed, its page holds no bug's id, title or five words in a row of
    its symptom or explanation, and no comment of the buggy code ("# no zero_grad()" names the
    bug). An answer read as plain base64, as any decoder reads it, names no bug either, and the
    page says the encoding is a speed bump, not security; Reveal decodes each card's own
    answer. The order is drawn from the seed, not the catalogue's."""
    from bugzoo.teach.cards import cards_page

    bugs = list_bugs()
    assert sum("#" in b.buggy for b in bugs) > 10  # the comments this test is about
    text = cards_page(bugs, tmp_path / "no-results", tmp_path / "all", seed=0)
    asked = before_reveal(text)
    assert not answers_shown(asked)
    for b in bugs:
        assert not (found := named(asked, b.id)), (b.id, found)
    assert "speed bump, not security" in asked
    glanced = [base64.b64decode(a).decode("latin-1")
               for a in re.findall(r"data-answer='([^']*)'", text)]
    assert len(glanced) == len(bugs) and not answers_shown(" ".join(glanced))
    order = [next(b.id for b in bugs if f"<b>{b.id}</b>:" in a) for a in revealed(text)]
    assert sorted(order) == sorted(b.id for b in bugs) and order != sorted(order)
    assert order != [next(b.id for b in bugs if f"<b>{b.id}</b>:" in a) for a in
                     revealed(cards_page(bugs, tmp_path / "none", tmp_path / "b", 1))]
    for shown in re.findall(r"<pre>(.*?)</pre>", asked, re.S):
        assert "#" not in shown and shown.strip()


@pytest.mark.slow
def test_a_student_sees_no_answer_before_revealing(tmp_path):
    """Issue 73's test: the cards page of a report of the committed results, and every card
    figure it shows, hold no id or title of any bug of the catalogue and no committed
    ``results/curves/*.png`` (by its sha256) before a card is revealed. Each bug with curve
    data has a figure drawn for its card, and Reveal gives each card its own bug."""
    out = tmp_path / "report"
    build(ROOT / "results", out, None, seed=0)
    text = (out / "cards.html").read_text()
    shown = re.findall(r"<img src='([^']*)'", text)
    with_curves = [b for b in list_bugs()
                   if (ROOT / "results" / "curves" / f"{flat_id(b.id)}.parquet").is_file()]
    assert len(shown) == len(with_curves) > 50 and all(s.startswith("cards/") for s in shown)
    assert not (found := answers_shown(before_reveal(text),
                                       [(out / s).read_bytes() for s in shown])), found
    answers = revealed(text)
    assert len(answers) == len(list_bugs())
    assert all(sum(f"<b>{b.id}</b>:" in a for b in list_bugs()) == 1 for a in answers)


def test_bug_pages_fall_back_to_the_published_per_bug_table(results):
    """Without a local sweep (a fresh clone), pages use results/leaderboard_bugs.csv."""
    from bugzoo.judge.scoring import bug_board, outcomes

    bug_board(outcomes(results / "runs" / "bench")).to_csv(results / "leaderboard_bugs.csv",
                                                           index=False)
    shutil.rmtree(results / "runs")
    build(results, results / "report", results / "runs" / "bench")
    page = (results / "report" / "bugs" / "double_softmax.html").read_text()
    assert "Detectors that catch it" in page and "ce_probabilities" in page


def test_every_outcome_a_check_reads_has_a_practitioners_words():
    """A card's symptom line comes from the bug's check: a new outcome needs its words."""
    from bugzoo.bugs.base import OUTCOMES
    from bugzoo.teach.catalogue import OUTCOME_WORDS, observed

    assert set(OUTCOME_WORDS) == set(OUTCOMES)
    assert {observed(b) for b in list_bugs()} >= {
        "The validation loss at the end is higher than in a working run.",
        "The run shows a crash; a working run does not."}


def test_a_cards_check_line_reads_for_every_kind_of_check():
    """``bugzoo show``'s check line in the summary's terms: a metric that moves one way, an
    event, and a metric that varies between two runs of one seed."""
    from bugzoo.bugs import get_bug
    from bugzoo.teach.catalogue import bug_card

    lines = {bug: next(line for line in bug_card(bug).splitlines() if "check:" in line)
             for bug in ("double_softmax", "adam_eps_fp16", "nondeterministic_seed")}
    assert lines["double_softmax"].endswith(
        f"{get_bug('double_softmax').check.metric} higher than in clean runs")
    assert lines["adam_eps_fp16"].endswith(
        "nonfinite, an event: in buggy runs more often than in clean runs")
    assert lines["nondeterministic_seed"].endswith("differs between two runs of the same seed")


def test_the_baselines_and_integrity_rows_are_not_among_the_detectors_of_a_bug(tmp_path):
    """They catch nothing by design: a bug page lists only detectors that try."""
    from bugzoo.teach.report import catches

    pd.DataFrame({"bug": "double_softmax", "detector": ["always_alarm", "settings_reader",
                                                        "ce_probabilities", "suite: built-ins"],
                  "hits": [6, 0, 6, 6], "runs": 6}).to_csv(tmp_path / "leaderboard_bugs.csv",
                                                            index=False)
    assert list(catches(None, tmp_path)["detector"]) == ["ce_probabilities", "suite: built-ins"]
