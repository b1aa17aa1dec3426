"""The catalogue: `bugzoo list` and `bugzoo show`, bad ids, and rules every bug, scenario and
detector of the registry meets."""

from __future__ import annotations

import functools

import pytest
from conftest import scenario_onset
from omegaconf import DictConfig, OmegaConf

from bugzoo.bugs import bug_ids, get_bug, list_bugs
from bugzoo.cli import main
from bugzoo.config import compose_run
from bugzoo.models import MODELS
from bugzoo.scenarios import list_scenarios, registry, settings_key

CORE = ("double_softmax", "missing_zero_grad", "fp16_no_scaler", "mask_after_softmax",
        "frozen_layers", "frozen_from_start", "leakage_norm_stats", "leakage_val_in_train")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_core_bugs_registered_with_scenarios():
    ids = bug_ids()
    for bug_id in CORE:
        assert bug_id in ids
        for model in get_bug(bug_id).models:
            assert f"{model}-{bug_id}" in registry(), (model, bug_id)


def test_list_bugs(capsys):
    code, out, _ = run(capsys, "list", "bugs")
    assert code == 0
    for bug_id in CORE:
        line = next(x for x in out.splitlines() if x.split()[:1] == [bug_id])
        assert get_bug(bug_id).category in line


def test_list_models_and_scenarios(capsys):
    code, out, _ = run(capsys, "list", "models")
    assert code == 0 and all(m in out for m in MODELS.names())
    code, out, _ = run(capsys, "list", "scenarios")
    assert code == 0
    assert "transformer-mask_after_softmax" in out and "mlp-clean" in out
    assert "lstm-mask_after_softmax" not in out


@pytest.mark.parametrize("bug_id", CORE)
def test_show_each_bug(capsys, bug_id):
    code, out, _ = run(capsys, "show", bug_id)
    bug = get_bug(bug_id)
    assert code == 0
    assert out.startswith(f"{bug_id} — {bug.title}")
    for section in ("SYMPTOM", "BUGGY", "FIXED", "WHY"):
        assert section in out
    assert bug.buggy.splitlines()[0] in out and bug.fixed.splitlines()[0] in out


def test_unknown_bug_suggests(capsys):
    code, _, err = run(capsys, "show", "missing_zero_gard")
    assert code == 2
    assert "did you mean 'missing_zero_grad'" in err


def test_unknown_list_suggests(capsys):
    code, _, err = run(capsys, "list", "bug")
    assert code == 2 and "did you mean 'bugs'" in err


def test_bug_not_applicable_names_models(capsys):
    code, _, err = run(capsys, "run", "model=lstm", "bug=mask_after_softmax")
    assert code == 2
    assert "does not apply to model 'lstm'" in err and "transformer" in err
    code, _, err = run(capsys, "run", "model=transformer", "bug=leakage_norm_stats")
    assert code == 2 and "mlp, resnet" in err


# ------------------------------------------------------------------ the whole registry
# Every bug, scenario and detector meets the same rules, as scikit-learn checks every
# estimator and Gymnasium every environment.
BUGS = list_bugs()
SUMMARY_METRICS = {"crashed", "hung", "holdout_loss", "holdout_acc", "val_holdout_gap",
                   "serving_gap", "generation_gap", "rank_param_divergence"}


@pytest.fixture(scope="module")
def summary_fields() -> set[str]:
    from bugzoo.harness.runner import execute

    cfg = compose_run(["scenario=mlp-clean", "harness.steps=3", "harness.eval_interval=3"])
    return set(execute(cfg).summary) | SUMMARY_METRICS


@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_every_bug_has_a_card_a_config_and_a_scenario_per_model(bug, summary_fields):
    for name in ("title", "symptom", "explanation", "buggy", "fixed", "onset_text"):
        assert str(getattr(bug, name)).strip(), f"{bug.id}: empty {name}"
    assert bug.check.metric in summary_fields, f"{bug.id}: unknown metric {bug.check.metric}"
    assert bug.check.direction in ("lower", "higher", "event", "varies")
    first = next(s for s in list_scenarios() if s.bug == bug.id)
    composed = compose_run([f"scenario={first.id}", "harness.device=cuda"]).bug
    assert composed.id == bug.id and set(bug.params) <= set(composed.params)
    for model in bug.models:  # a scenario (an excluded one carries its reason)
        assert [s for s in list_scenarios() if s.bug == bug.id and s.model == model], (
            f"{bug.id} lists {model} but no scenario plants it there")


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_every_bug_is_planted_on_the_language_model_or_says_why_not(bug):
    planted = "gpt" in bug.models
    assert planted != ("gpt" in bug.inapplicable), (
        f"{bug.id}: plant it on the gpt (a gpt-{bug.id} scenario) or say why it does not "
        "apply (Bug.inapplicable)")
    assert not planted or bug.inapplicable.get("gpt") is None
    assert all(len(reason) > 40 for reason in bug.inapplicable.values())


BUGGY = [s for s in list_scenarios() if not s.clean]


@functools.cache
def composed_on_cuda(scenario_id: str) -> DictConfig:
    """The scenario's run config on a CUDA device (so CUDA-only bugs compose), composed once
    per process: many buggy scenarios share a control."""
    return compose_run([f"scenario={scenario_id}", "harness.device=cuda"])


def settings(cfg: DictConfig) -> dict:
    """Everything a run is set to, but its bug and scenario labels."""
    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items()
            if k not in ("scenario", "bug", "description", "excluded", "unproven")}


@pytest.mark.parametrize("scenario", BUGGY, ids=[s.id for s in BUGGY])
def test_every_buggy_scenario_has_a_matched_control(scenario):
    """The control composes to the buggy scenario's exact settings, without the bug."""
    assert scenario.control, f"{scenario.id}: no clean scenario has its settings"
    composed = composed_on_cuda(scenario.id)
    assert settings(composed) == settings(composed_on_cuda(scenario.control))
    assert scenario_onset(scenario) == composed.bug.onset  # the spec reads the onset as Hydra composes it


def test_no_two_clean_scenarios_share_their_settings():
    seen: dict = {}
    for s in list_scenarios():
        if s.clean:
            assert settings_key(s) not in seen, f"{s.id} repeats {seen.get(settings_key(s))}"
            seen[settings_key(s)] = s.id


@pytest.mark.parametrize("variable", ["final_lr", "mean_lr", "train_mode_frac",
                                      "rank_param_divergence", "trace_digest",
                                      "mean_zero_grad_frac"])
def test_a_symptom_check_refuses_the_variable_a_bug_sets(variable):
    """A symptom is an outcome a practitioner observes, never what the bug sets."""
    from bugzoo.bugs.base import OUTCOMES, SymptomCheck

    with pytest.raises(ValueError, match="reads an outcome"):
        SymptomCheck(variable, "higher")
    assert {b.check.metric for b in list_bugs()} <= set(OUTCOMES)


@pytest.mark.parametrize("overrides", [
    ["scenario=mlp-double_softmax", "seed=4", "harness.steps=20", "optim.lr=30"],
    ["model=lstm", "bug=missing_zero_grad", "bug.onset=100", "seed=3"],
    ["scenario=transformer-clean", "data.seed=7", "loss.label_smoothing=0.1", "seed=1"],
    ["scenario=mlp-double_softmax", "~bug", "harness.eval_interval=5"],
    ["scenario=mlp-clean", "+detector.loss_plateau.window=5", "detector=[loss_plateau]"],
])
def test_a_kept_composition_with_its_values_set_is_what_hydra_composes(overrides):
    """compose_run sets plain values on a kept composition (a sweep's runs of one scenario
    compose once); the result must be Hydra's own, value for value and flag for flag."""
    from bugzoo.config import _hydra_compose

    for _ in range(2):  # composed, then from the kept composition
        fast, slow = compose_run(overrides), _hydra_compose(list(overrides))
        assert OmegaConf.to_container(fast) == OmegaConf.to_container(slow)
        assert OmegaConf.is_struct(fast) and OmegaConf.is_struct(slow)


@pytest.fixture
def composition_cache(tmp_path, monkeypatch):
    """An empty cache folder of this test's own, and no composition kept in memory."""
    from bugzoo import config

    monkeypatch.setenv("BUGZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "_composed", config.OrderedDict())
    return tmp_path / "cache"


def composed_by_hydra_only(monkeypatch) -> None:
    """From here on, a compose that reaches Hydra fails the test."""
    from bugzoo import config

    def refuse(overrides):
        raise AssertionError(f"composed again: {overrides}")

    monkeypatch.setattr(config, "_composed", config.OrderedDict())
    monkeypatch.setattr(config, "_hydra_compose", refuse)


def test_a_composition_kept_on_disk_is_what_hydra_composes(composition_cache, monkeypatch):
    """The next process reads a scenario's composition from disk, as Hydra would compose it."""
    from bugzoo.config import _hydra_compose

    overrides = ["scenario=lstm-missing_zero_grad", "seed=2", "harness.steps=30"]
    compose_run(overrides)
    slow = _hydra_compose(overrides)
    assert len(list(composition_cache.rglob("*.pkl"))) == 1
    composed_by_hydra_only(monkeypatch)
    fast = compose_run(overrides)
    assert OmegaConf.to_container(fast) == OmegaConf.to_container(slow)
    assert OmegaConf.is_struct(fast)


@pytest.mark.parametrize("edit", ["value", "new file", "deleted file"])
def test_a_composition_is_not_reused_once_conf_changes(edit, composition_cache, tmp_path,
                                                      monkeypatch):
    import os
    import shutil

    from bugzoo import config

    conf = tmp_path / "conf"
    shutil.copytree(config.CONF_DIR, conf)
    for path in conf.rglob("*.yaml"):  # one time for all: the deleted file is not the newest
        os.utime(path, ns=(10**18, 10**18))
    monkeypatch.setattr(config, "CONF_DIR", conf)
    first = compose_run(["scenario=mlp-clean"])
    if edit == "value":
        harness = conf / "harness" / "default.yaml"
        harness.write_text(harness.read_text().replace("eval_interval: 50", "eval_interval: 7"))
    elif edit == "new file":
        (conf / "optim" / "lion.yaml").write_text("name: lion\nlr: 0.0001\n")
    else:
        (conf / "optim" / "sgd.yaml").unlink()
    monkeypatch.setattr(config, "_composed", config.OrderedDict())  # a new process
    again = compose_run(["scenario=mlp-clean"])
    assert OmegaConf.to_container(again) == OmegaConf.to_container(
        config._hydra_compose(["scenario=mlp-clean"]))
    if edit == "value":
        assert (first.harness.eval_interval, again.harness.eval_interval) == (50, 7)
    assert len(list(composition_cache.rglob("*.pkl"))) == 2


def test_an_unreadable_kept_composition_is_composed_again(composition_cache, monkeypatch):
    from bugzoo import config

    compose_run(["scenario=mlp-clean"])
    (kept,) = composition_cache.rglob("*.pkl")
    kept.write_bytes(kept.read_bytes()[:100])  # cut short, as by a full disk
    monkeypatch.setattr(config, "_composed", config.OrderedDict())
    assert compose_run(["scenario=mlp-clean", "seed=5"]).seed == 5


def test_with_the_cache_off_no_composition_is_written(tmp_path, monkeypatch):
    from bugzoo import config

    monkeypatch.setenv("BUGZOO_CACHE", "off")
    monkeypatch.setattr(config, "_composed", config.OrderedDict())
    monkeypatch.setattr(config.Path, "home", lambda: tmp_path)
    assert compose_run(["scenario=mlp-clean"]).model.name == "mlp"
    assert not list(tmp_path.rglob("*.pkl"))


def test_a_single_composition_carries_only_the_bugs_it_can_select(tmp_path, monkeypatch):
    """Hydra deep-copies its whole store on every compose: a single one holds its scenario's
    bug and a ``bug=`` override's, and still composes either (no composition kept, on disk
    or in this process, so Hydra composes each here)."""
    from collections import OrderedDict

    from hydra.core.config_store import ConfigStore

    from bugzoo import config

    monkeypatch.setenv("BUGZOO_CACHE", "off")
    monkeypatch.setattr(config, "_composed", OrderedDict())
    cfg = compose_run(["scenario=mlp-clean", "bug=lr_too_high", "seed=17"])
    assert cfg.bug.id == "lr_too_high"
    assert set(ConfigStore.instance().repo["bug"]) == {"lr_too_high.yaml"}
    assert compose_run(["scenario=mlp-double_softmax", "seed=17"]).bug.id == "double_softmax"
    assert set(ConfigStore.instance().repo["bug"]) == {"double_softmax.yaml"}


@pytest.mark.parametrize("overrides, scenarios, bugs", [
    (["scenario=mlp-clean,mlp-lr_too_high", "seed=0,1"], {"mlp-clean", "mlp-lr_too_high"},
     {"lr_too_high"}),
    (["scenario=glob(lstm-clean*,exclude=*two_ranks)"], "lstm-clean*", set()),
    (["model=lstm", "bug=double_softmax,missing_zero_grad"], set(),
     {"double_softmax", "missing_zero_grad"}),
    (["scenario=mlp-double_softmax", "bug=glob(missing_z*)"], {"mlp-double_softmax"},
     {"double_softmax", "missing_zero_grad"}),
    (["seed=0,1"], set(), set()),
])
def test_a_multirun_store_holds_what_its_sweep_can_select(overrides, scenarios, bugs):
    """Hydra copies its whole store for every job of a multirun: the sweep's scenarios and
    their bugs, with a ``bug=`` override's, are all it needs."""
    from fnmatch import fnmatch

    from bugzoo.config import multirun_choices

    if isinstance(scenarios, str):
        scenarios = {s for s in registry() if fnmatch(s, scenarios) and "two_ranks" not in s}
        assert len(scenarios) > 3
    chosen, chosen_bugs = multirun_choices(overrides)
    assert {s.id for s in chosen} == scenarios and chosen_bugs == bugs


@pytest.mark.parametrize("overrides", [
    ["scenario=mlp-clean,mlp-cleen"],  # Hydra names the choices in its error: every one
    ["bug=range(1,3)"],
    ["scenario=mlp-clean", "hydra.sweeper.params.seed=0,1"],
    ["scenario=mlp-clean,"],  # unparsable: Hydra says so
])
def test_a_multirun_the_choices_cannot_be_read_off_holds_every_scenario_and_bug(overrides):
    from bugzoo.config import multirun_choices

    chosen, chosen_bugs = multirun_choices(overrides)
    assert len(chosen) == len(registry()) and chosen_bugs is None
