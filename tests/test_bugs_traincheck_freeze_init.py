"""Two of TrainCheck's real silent errors, planted literally: a freeze applied only by the
backbone's train() (mmpretrain-702) and a weight init repeated once per submodule
(transformers-17877). Cheap mechanism tests: built runs and a few steps."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.train import Trainer

SHORT = ("harness.steps=4", "harness.device=cpu")


def built(scenario: str, *extra: str, armed: bool = True) -> Trainer:
    cfg = compose_run([f"scenario={scenario}", *SHORT, *extra])
    return Trainer(cfg, get_bug(cfg.bug.id) if cfg.get("bug") else None, armed=armed).build()


def backbone_state(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.model.backbone.state_dict().items()
            if v.is_floating_point() and "running" not in k}


def moved(before: dict, trainer: Trainer) -> list[str]:
    return [k for k, v in trainer.model.backbone.state_dict().items()
            if k in before and not torch.equal(before[k], v)]


# ----------------------------------------------------------------- freeze_in_train_override
@pytest.mark.parametrize("model", ["mlp", "resnet"])
def test_a_probe_whose_freeze_lives_in_train_trains_its_backbone(model):
    """The loop configures the freeze after fit()'s model.train(): the backbone trains; in the
    disarmed twin (the clean linear probe) it does not move."""
    buggy = built(f"{model}-freeze_in_train_override")
    before = backbone_state(buggy)
    buggy.fit()
    assert len(moved(before, buggy)) == len(before)
    twin = built(f"{model}-freeze_in_train_override", armed=False)
    before = backbone_state(twin)
    twin.fit()
    assert moved(before, twin) == []


def test_the_freeze_takes_effect_at_the_next_train_call():
    """mmpretrain's mechanism: the freeze is applied by the backbone's train(); an evaluation
    (eval() then train()) mid-run applies it, and from then on the backbone stays put."""
    trainer = built("mlp-freeze_in_train_override", "harness.steps=6",
                    "harness.eval_interval=3")
    before = backbone_state(trainer)
    trainer.fit(steps=3)  # steps 0-2; the evaluation after step 2 calls train()
    assert all(p.requires_grad is False for p in trainer.model.backbone.parameters())
    assert moved(before, trainer)
    after_eval = backbone_state(trainer)
    trainer.fit(steps=3)
    assert moved(after_eval, trainer) == []
    assert all(p.requires_grad for p in trainer.model.head.parameters())


def test_the_linear_probe_control_freezes_at_step_0():
    trainer = built("mlp-clean-linear_probe")
    before = backbone_state(trainer)
    trainer.fit()
    assert moved(before, trainer) == []
    assert not any(p.requires_grad for p in trainer.model.backbone.parameters())


# ----------------------------------------------------------------- init_repeated
@pytest.fixture
def resets(monkeypatch):
    """Count reset_parameters calls per layer class while a run is built."""
    counts: dict[str, int] = {}

    def counting(cls):
        original = cls.reset_parameters

        def reset_parameters(self, *args, **kwargs):
            counts[cls.__name__] = counts.get(cls.__name__, 0) + 1
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "reset_parameters", reset_parameters)

    for cls in (nn.Linear, nn.Embedding, nn.LayerNorm):
        counting(cls)
    return counts


@pytest.mark.parametrize("scenario", ["mlp-init_repeated", "transformer-init_repeated"])
def test_the_whole_model_is_initialised_once_per_submodule(scenario, resets):
    trainer = built(scenario)
    submodules = len(list(trainer.model.modules()))
    linears = sum(isinstance(m, nn.Linear) for m in trainer.model.modules())
    # once when built, then once per submodule each time over the whole model
    assert resets["Linear"] == linears * (1 + submodules)
    resets.clear()
    built(scenario, armed=False)
    assert resets["Linear"] == linears


def test_the_repeated_init_leaves_a_correct_init():
    """Every draw is a valid init: the head starts small, the first loss is near log(C), and
    only the draw differs from the clean run's."""
    buggy, clean = built("mlp-init_repeated"), built("mlp-clean-depth8")
    head = buggy.model.head
    assert head.bias.abs().max() == 0
    assert head.weight.abs().max() <= 0.1 / math.sqrt(head.in_features) + 1e-7
    assert head.weight.std().item() == pytest.approx(clean.model.head.weight.std().item(),
                                                     rel=0.2)
    batch = next(iter(buggy.train_loader)).to(buggy.device)
    with torch.no_grad():
        loss = nn.functional.cross_entropy(buggy.model(*batch.inputs), batch.y).item()
    assert loss == pytest.approx(math.log(buggy.data.num_classes), rel=0.1)
    assert not torch.equal(head.weight, clean.model.head.weight)
