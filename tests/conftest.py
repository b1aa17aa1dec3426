"""Shared test helpers: quick run configs and a private results folder."""

from __future__ import annotations

import gc
import hashlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

from bugzoo.bugs import flat_id, get_bug, list_bugs
from bugzoo.config import compose_run
from bugzoo.paths import CONF_DIR
from bugzoo.scenarios import Scenario

torch.set_num_threads(1)  # as in the harness' workers: fast for tiny models, reproducible
# task-script runs and compositions are kept in a cache of this test session's own, never the
# user's: the pytest -n workers inherit the folder the main process made, and share it
OWNS_SESSION_CACHE = "BUGZOO_TEST_SESSION_CACHE" not in os.environ  # not a pytest -n worker
if OWNS_SESSION_CACHE:
    os.environ["BUGZOO_TEST_SESSION_CACHE"] = tempfile.mkdtemp(prefix="bugzoo-cache-")
os.environ["BUGZOO_CACHE"] = os.environ["BUGZOO_TEST_SESSION_CACHE"]
# what is imported by now (torch, pandas, Hydra, the harness) lives as long as the test process:
# a full garbage collection need not walk it again (each took a fifth of a second)
gc.freeze()


def quick_cfg(*overrides: str, steps: int = 60):
    """A run config with short settings; later overrides win."""
    return compose_run([f"harness.steps={steps}", "harness.eval_interval=20", *overrides])


def trace_only(cfg: DictConfig) -> DictConfig:
    """``cfg`` for a test that compares traces: without what a run measures only after
    training, and as much of it as depends on the validation set's size. That is the serving
    check at every padding width, and all but 32 of a language model's validation and holdout
    sentences (its generation check continues each validation sentence, seconds on one thread).
    Both sides of a comparison must go through it."""
    if cfg.data.params.get("serve_pad_to"):
        cfg.data.params.serve_pad_to = None
    if cfg.data.name == "language":
        with open_dict(cfg.data.params):
            cfg.data.params.n_val = cfg.data.params.n_holdout = 32
    return cfg


def scenario_onset(scenario: Scenario) -> int | None:
    """The step a scenario's bug starts at, read off its file without composing it (composing
    every scenario costs seconds): the file's ``bug.onset``, else the bug's own, resolved
    against the scenario's settings when it names one (``${optim.freeze_backbone_steps}``).
    tests/test_registry.py holds it against what Hydra composes."""
    if scenario.bug is None:
        return None
    onset = scenario.bug_config.get("onset", get_bug(scenario.bug).onset)
    if isinstance(onset, str):
        chosen = scenario.settings.get("defaults", {})
        groups = {g: _group_defaults(g, chosen.get(g)) for g in ("optim", "harness")}
        settings = {g: scenario.settings.get(g) or {} for g in groups}
        onset = OmegaConf.select(OmegaConf.merge(groups, settings, {"bug": {"onset": onset}}),
                                 "bug.onset")
    return int(onset)


def _group_defaults(group: str, choice: str | None) -> dict:
    """A conf/ group's file: the scenario's choice, else conf/config.yaml's."""
    if choice is None:
        defaults = yaml.safe_load((CONF_DIR / "config.yaml").read_text())["defaults"]
        choice = next(e[group] for e in defaults if isinstance(e, dict) and group in e)
    return yaml.safe_load((CONF_DIR / group / f"{choice}.yaml").read_text()) or {}


ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "pages"


def doc_section(section: str) -> tuple[Path, str]:
    """The docs page holding the heading ``section`` (any level) and the text under it, up to the
    next heading of the same or a higher level outside code blocks."""
    for page in sorted(DOCS.glob("*.md")):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            level = len(line) - len(line.lstrip("#"))
            if level and line[level:] == f" {section}":
                body, fenced = [], False
                for rest in lines[i + 1:]:
                    fenced ^= rest.startswith("```")
                    depth = len(rest) - len(rest.lstrip("#"))
                    if not fenced and 0 < depth <= level and rest[depth:].startswith(" "):
                        break
                    body.append(rest)
                return page, "\n".join(body) + "\n"
    raise AssertionError(f"no page under docs/pages has the section {section!r}")


def doc_examples(section: str, language: str) -> list[str]:
    """The ``language`` code blocks of the docs section ``section``, in order (tests run them)."""
    return re.findall(rf"```{language}\n(.*?)```", doc_section(section)[1], re.S)


def giveaways(bug_id: str) -> list[str]:
    """What would name the bug to a student: its id, file, title, and any 5 words in a row of
    its card, lower case (compare with lower-cased text whose whitespace is single spaces)."""
    bug = get_bug(bug_id)
    words = re.findall(r"[\w'-]+", f"{bug.symptom} {bug.explanation}".lower())
    return [bug_id, f"{bug_id}.py", bug.title.lower(),
            *(" ".join(words[i:i + 5]) for i in range(len(words) - 4))]


def named(text: str, bug_id: str) -> list[str]:
    """The giveaways of ``bug_id`` found in ``text``."""
    text = re.sub(r"\s+", " ", text.lower())
    return [g for g in giveaways(bug_id) if g in text]


def answers_shown(text: str, images: Iterable[bytes] = ()) -> list[str]:
    """What of any bug's answer a student sees in ``text`` and the ``images`` beside it: the
    id or title of any bug of the catalogue (in the text, or in an image's bytes), and
    any committed ``results/curves/*.png`` (its sha256 in the text, or an image that is one)."""
    published = {hashlib.sha256(p.read_bytes()).hexdigest(): p.name
                 for p in sorted((ROOT / "results" / "curves").glob("*.png"))}
    names = sorted({name for b in list_bugs()
                    for name in (b.id, flat_id(b.id), b.title.lower())})
    text = re.sub(r"\s+", " ", text.lower())
    found = [name for name in names if name in text]
    found += [f"the sha256 of curves/{name}" for digest, name in published.items()
              if digest in text]
    for n, image in enumerate(images):
        if (same := published.get(hashlib.sha256(image).hexdigest())) is not None:
            found.append(f"image {n} is curves/{same}")
        found += [f"{name} in image {n}" for name in names if name.encode() in image.lower()]
    return found


@pytest.fixture
def results_dir(tmp_path):
    return tmp_path / "results"


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's cache goes with the process that made it (each run left one in /tmp)."""
    if OWNS_SESSION_CACHE:
        shutil.rmtree(os.environ["BUGZOO_TEST_SESSION_CACHE"], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``pytest -n`` (``--dist loadgroup``, set in pyproject.toml), the tests that share a
    module- or session-scoped fixture run on one worker, so its work (a sweep, the GPU dry
    pass) is done once, not once per worker. And the slow tests (``@pytest.mark.slow``), with
    the groups they belong to, are handed out first, so that the suite does not end waiting on
    one of them while the other workers sit idle."""
    groups = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        shared = sorted(name for name in (info.names_closure if info else ())
                        if (defs := info.name2fixturedefs.get(name))
                        and defs[-1].scope in ("module", "session")
                        and "tests" in Path(str(defs[-1].baseid) or ".").parts
                        and name not in CLEANUP_ONLY)
        if shared:
            groups[item.nodeid] = f"{item.path.stem}:{shared[0]}"
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
    slow = {groups.get(i.nodeid, i.nodeid) for i in items if i.get_closest_marker("slow")}
    items.sort(key=lambda i: groups.get(i.nodeid, i.nodeid) not in slow)  # stable: slow first


def check_callback_trace(example: dict, folder: Path, steps: int) -> None:
    """The docs' ``traced`` callback wrote a trace of the docs' diverging ``Classifier`` to
    ``folder``: ``steps`` records at the example's learning rate, with gradients, and alarms that
    rescore from the folder to those seen live."""
    from bugzoo.integrations.recorder import check_trace, read_trace

    facts, records = read_trace(folder)
    assert (facts.model_name, facts.num_classes, facts.steps) == (
        "Classifier", example["data"].num_classes, steps)
    assert len(records) == steps and records[0].grad_norm > 0 and records[0].lr == 30.0
    live = pd.DataFrame(example["traced"].alarms)[["detector", "step", "symptom", "message"]]
    assert "nonfinite" in set(live["detector"])
    rescored = check_trace(folder)[list(live.columns)]
    pd.testing.assert_frame_equal(rescored.reset_index(drop=True), live.reset_index(drop=True))


CLEANUP_ONLY = {"_grading_servers_closed"}  # module fixtures that share no work: no group


@pytest.fixture(autouse=True, scope="module")
def _grading_servers_closed():
    """After each test module, the sealed grading servers its grades left for reuse are
    closed, so a later test that counts its worker's child processes finds none of them."""
    yield
    if (runs := sys.modules.get("bugzoo.teach.tasks.sealed_runs")) is not None and runs._shared:
        runs._close_shared()
        runs._shared.clear()
