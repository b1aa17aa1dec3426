"""The catalogue on the command line: ``bugzoo list`` and ``bugzoo show``, and bad ids."""

from __future__ import annotations

import pytest

from bugzoo.bugs import bug_ids, get_bug
from bugzoo.cli import main
from bugzoo.config import scenarios
from bugzoo.models import MODELS

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
            assert f"{model}-{bug_id}" in scenarios(), (model, bug_id)


def test_list_bugs(capsys):
    code, out, _ = run(capsys, "list", "bugs")
    assert code == 0
    for bug_id in CORE:
        line = next(x for x in out.splitlines() if x.split()[:1] == [bug_id])
        assert get_bug(bug_id).category in line


def test_list_models_and_scenarios(capsys):
    code, out, _ = run(capsys, "list", "models")
    assert code == 0 and all(m in out for m in MODELS)
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
