"""Model-architecture bugs: each built model really has the mistake (read off its modules and
one forward or backward pass), and its disarmed twin builds the clean model."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.train import Trainer


def built(scenario: str, armed: bool = True, *overrides: str) -> Trainer:
    cfg = compose_run([f"scenario={scenario}", "harness.device=cpu", *overrides])
    bug = get_bug(cfg.bug.id) if cfg.get("bug") else None
    return Trainer(cfg, bug, armed=armed).build()


def count(model: nn.Module, kind: type | tuple[type, ...]) -> int:
    return sum(isinstance(m, kind) for m in model.modules())


def first_batch(trainer: Trainer):
    return next(iter(trainer.train_loader))


def relu_inputs(trainer: Trainer) -> list[torch.Tensor]:
    """What each ReLU call receives on one training batch."""
    seen: list[torch.Tensor] = []
    hooks = [m.register_forward_hook(lambda m, i, o: seen.append(i[0].detach()))
             for m in trainer.model.modules() if isinstance(m, nn.ReLU)]
    with torch.no_grad():
        trainer.forward(first_batch(trainer))
    for hook in hooks:
        hook.remove()
    return seen


@pytest.mark.parametrize("scenario", ["mlp-sigmoid_hidden", "resnet-sigmoid_hidden",
                                      "mlp-missing_activation", "resnet-missing_activation",
                                      "resnet-missing_norm_layer", "transformer-missing_norm_layer",
                                      "resnet-conv_kernel_1x1", "resnet-no_global_pooling",
                                      "mlp-head_width_hardcoded", "mlp-narrow_bottleneck",
                                      "resnet-pooling_too_aggressive", "mlp-dying_relu_bias"])
def test_the_disarmed_twin_builds_the_clean_model(scenario):
    twin = built(scenario, armed=False)
    clean = Trainer(compose_run([f"scenario={scenario}", "harness.device=cpu", "~bug"])).build()
    assert repr(twin.model) == repr(clean.model)
    for a, b in zip(twin.model.state_dict().values(), clean.model.state_dict().values(),
                    strict=True):
        assert torch.equal(a, b)


def test_sigmoid_hidden_swaps_every_relu_and_the_early_gradients_vanish():
    """Every ReLU of the deep MLP is a Sigmoid; at step 0 the first layer's gradient is orders
    of magnitude below the clean model's, and below its own last hidden layer's."""
    norms = {}
    for armed in (True, False):
        trainer = built("mlp-sigmoid_hidden", armed)
        model = trainer.model
        assert count(model, nn.Sigmoid) == (8 if armed else 0)
        assert count(model, nn.ReLU) == (0 if armed else 8)
        batch = first_batch(trainer)
        trainer.compute_loss(trainer.forward(batch), batch.y).backward()
        linears = [m for m in model.backbone if isinstance(m, nn.Linear)]
        norms[armed] = (linears[0].weight.grad.norm().item(), linears[-1].weight.grad.norm().item())
    assert norms[True][0] < 1e-3 * norms[False][0]
    assert norms[True][0] < 1e-3 * norms[True][1]
    resnet = built("resnet-sigmoid_hidden").model
    assert count(resnet, nn.ReLU) == 0 and count(resnet, nn.Sigmoid) == 3


def test_missing_activation_makes_the_mlp_one_affine_map():
    """Without its ReLUs the MLP (in eval mode) is affine: f(a) + f(b) = f(a + b) + f(0)."""
    for armed in (True, False):
        model = built("mlp-missing_activation", armed).model.eval()
        a, b = torch.randn(2, 8, 16).unbind()
        zero = torch.zeros(8, 16)
        with torch.no_grad():
            affine = torch.allclose(model(a) + model(b), model(a + b) + model(zero), atol=1e-4)
        assert affine is armed
    assert count(built("resnet-missing_activation").model, nn.ReLU) == 0


@pytest.mark.parametrize(("scenario", "layer"), [("mlp-linear_in_features_wrong", "first"),
                                                  ("resnet-linear_in_features_wrong", "head")])
def test_linear_in_features_wrong_builds_then_fails_at_the_first_forward(scenario, layer):
    trainer = built(scenario)
    model = trainer.model
    if layer == "first":
        assert model.backbone[0].in_features == 128 != trainer.data.train.x.shape[1]
    else:
        assert model.head.in_features == 16 and model.head.out_features == 6
        assert not model.head.bias.any()  # started as the clean builder starts a head
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        trainer.forward(first_batch(trainer))


def test_narrow_bottleneck_squeezes_every_input_through_two_units():
    mlp = built("mlp-narrow_bottleneck").model
    assert [m.out_features for m in mlp.backbone if isinstance(m, nn.Linear)] == [2, 128]
    trainer = built("resnet-narrow_bottleneck")
    features = trainer.model.backbone(first_batch(trainer).inputs[0])
    assert features.shape == (32, 2) and trainer.model.head.in_features == 2


def test_conv_kernel_1x1_leaves_no_spatial_kernel():
    model = built("resnet-conv_kernel_1x1").model
    kernels = {m.kernel_size for m in model.modules() if isinstance(m, nn.Conv2d)}
    assert kernels == {(1, 1)}
    assert count(model, nn.Conv2d) == count(built("resnet-conv_kernel_1x1", False).model,
                                            nn.Conv2d)


@pytest.mark.parametrize("model", ["resnet", "transformer"])
def test_missing_norm_layer_leaves_no_normalisation(model):
    trainer = built(f"{model}-missing_norm_layer")
    assert count(trainer.model, (nn.BatchNorm2d, nn.LayerNorm)) == 0
    assert count(built(f"{model}-missing_norm_layer", False).model,
                 (nn.BatchNorm2d, nn.LayerNorm)) > 0
    assert trainer.forward(first_batch(trainer)).isfinite().all()


def test_no_global_pooling_head_reads_the_whole_feature_map():
    trainer = built("resnet-no_global_pooling")
    model = trainer.model
    assert count(model, nn.AdaptiveAvgPool2d) == 0
    assert model.head.in_features == 32 * 8 * 8
    batch = first_batch(trainer)
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.forward(batch), batch.y).item()
    assert abs(loss - math.log(6)) < 0.1  # its head started small, as the clean one does


@pytest.mark.parametrize(("scenario", "classes"), [("mlp-head_width_hardcoded", 6),
                                                    ("lstm-head_width_hardcoded", 2)])
def test_head_width_hardcoded_has_ten_outputs_and_starts_at_log_ten(scenario, classes):
    trainer = built(scenario)
    assert trainer.data.num_classes == classes and trainer.model.head.out_features == 10
    batch = first_batch(trainer)
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.forward(batch), batch.y).item()
    assert abs(loss - math.log(10)) < 0.05


@pytest.mark.parametrize(("scenario", "dead"), [("mlp-dying_relu_bias", 0.9),
                                                ("resnet-dying_relu_bias", 0.7)])
def test_dying_relu_bias_leaves_most_relus_without_gradient(scenario, dead):
    """AUTOTRAINER's dying ReLU: at least 70% of the pre-activations have zero gradient (their
    ReLU input is not positive); the clean model has about half."""
    for armed in (True, False):
        inputs = torch.cat([x.flatten() for x in relu_inputs(built(scenario, armed))])
        share = (inputs <= 0).float().mean().item()
        assert (share > dead) if armed else (0.3 < share < 0.6), share


def test_pooling_too_aggressive_leaves_the_stages_a_4x4_map():
    trainer = built("resnet-pooling_too_aggressive")
    backbone = trainer.model.backbone
    assert isinstance(backbone[3], nn.MaxPool2d) and backbone[3].kernel_size == 4
    with torch.no_grad():
        assert backbone[:4](first_batch(trainer).inputs[0]).shape[-2:] == (4, 4)
