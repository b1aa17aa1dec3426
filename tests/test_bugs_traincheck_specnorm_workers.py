"""Two of TrainCheck's real silent errors: the legacy spectral_norm evaluated before its first
training forward (pytorch-51800), and a dataset's generator copied into every DataLoader worker
(stackoverflow-67180955); with the clean-path settings they need (a spectral-norm model
setting, a training augmentation and simulated loader workers)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import quick_cfg
from torch import nn
from torch.nn.utils.spectral_norm import SpectralNorm

from bugzoo.bugs import get_bug
from bugzoo.data.augment import AugmentedSplit
from bugzoo.data.base import BatchLoader, Split, reseed_dataset_generator
from bugzoo.harness.runner import execute
from bugzoo.train import Trainer


def built(scenario: str, armed: bool = True) -> Trainer:
    cfg = quick_cfg(f"scenario={scenario}", "harness.device=cpu")
    bug = get_bug(cfg.bug.id) if cfg.get("bug") is not None else None
    return Trainer(cfg, bug, armed=armed).build()


# ---------------------------------------------------------------- spectral_norm_eval_first
@pytest.mark.parametrize("model,layer", [("mlp", nn.Linear), ("resnet", nn.Conv2d)])
def test_the_spectral_norm_setting_parametrizes_the_backbone_not_the_head(model, layer):
    trainer = built(f"{model}-clean-spectral_norm")
    wrapped = [m for m in trainer.model.backbone.modules() if isinstance(m, layer)]
    assert wrapped and all(nn.utils.parametrize.is_parametrized(m, "weight") for m in wrapped)
    assert not nn.utils.parametrize.is_parametrized(trainer.model.head)


@pytest.mark.parametrize("model", ["mlp", "resnet"])
def test_the_plant_is_the_legacy_hook_api_on_the_same_layers(model):
    clean = built(f"{model}-clean-spectral_norm").model
    buggy = built(f"{model}-spectral_norm_eval_first").model
    twin = built(f"{model}-spectral_norm_eval_first", armed=False).model
    legacy = [m for m in buggy.backbone.modules() if hasattr(m, "weight_orig")]
    assert len(legacy) == sum(nn.utils.parametrize.is_parametrized(m, "weight")
                              for m in clean.backbone.modules())
    assert all(isinstance(m._forward_pre_hooks[k], SpectralNorm)
               for m in legacy for k in m._forward_pre_hooks)
    assert not nn.utils.parametrize.is_parametrized(legacy[0])
    # the twin builds the clean model: parametrized, same weights
    assert [k for k in twin.state_dict()] == [k for k in clean.state_dict()]


def test_an_eval_first_forward_blows_up_the_legacy_layers_only():
    """Same initial weights; in eval mode before any training forward the legacy layers divide
    by u^T W v of random vectors, the parametrized ones by the real largest singular value."""
    clean = built("mlp-clean-spectral_norm")
    buggy = built("mlp-spectral_norm_eval_first")
    x = clean.data.val.x[:256]
    first = buggy.model.backbone[0]
    torch.testing.assert_close(first.weight_orig,
                               clean.model.backbone[0].parametrizations.weight.original)
    clean.model.eval(), buggy.model.eval()
    with torch.no_grad():
        healthy, blown = clean.model.backbone[0](x), first(x)
    assert blown.abs().mean() > 3 * healthy.abs().mean()


def test_the_baseline_evaluation_reports_the_symptom():
    def initial(scenario: str) -> float:
        return execute(quick_cfg(f"scenario={scenario}", "harness.device=cpu",
                                 "harness.steps=2", "harness.eval_interval=2")
                       ).summary["initial_val_loss"]

    clean = initial("mlp-clean-spectral_norm")
    assert abs(clean - math.log(6)) < 0.05  # chance level, as an untrained model's should be
    assert initial("mlp-spectral_norm_eval_first") > clean + 1


# ---------------------------------------------------------------- worker_rng_copied
def test_workers_off_reads_batches_as_before():
    """Without workers the loader draws nothing but its shuffle (default traces unchanged)."""
    split = Split(torch.arange(40.0).view(20, 2), torch.arange(20))
    loader = BatchLoader(split, 4, shuffle=True, seed=3)
    order = torch.randperm(20, generator=torch.Generator().manual_seed(3))
    assert torch.equal(torch.cat([b.y for b in loader]), order)
    assert loader.num_workers == 0 and loader.worker_init_fn is None


def test_each_worker_reads_its_own_copy_round_robin():
    split = Split(torch.zeros(16, 3), torch.arange(16))
    loader = BatchLoader(split, 4, shuffle=False, num_workers=2)
    seen = []
    loader.worker_init_fn = lambda worker: seen.append((worker.id, worker.seed,
                                                        worker.dataset is split))
    batches = [b.y.tolist() for b in loader]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    (id0, seed0, same0), (id1, seed1, same1) = seen
    assert (id0, id1) == (0, 1) and seed1 == seed0 + 1 and not same0 and not same1
    list(loader)
    assert seen[2][1] != seed0  # a new base seed every epoch


def draws(loader: BatchLoader) -> list[torch.Tensor]:
    """The noise each worker's copy adds to the same zero rows, for one epoch's workers."""
    return [copy.inputs(torch.arange(4))[0] for copy in loader.start_workers()]


def test_the_clean_worker_init_fn_gives_each_worker_and_epoch_its_own_draws():
    trainer = built("mlp-clean-augment_workers2")
    loader = trainer.train_loader
    assert isinstance(loader.split, AugmentedSplit) and loader.num_workers == 2
    assert loader.worker_init_fn is reseed_dataset_generator
    loader.split = AugmentedSplit.of(Split(torch.zeros(8, 5), torch.zeros(8)),
                                     loader.split.augmentation, seed=0)
    first, second = draws(loader), draws(loader)
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[0], second[0])


def test_the_plant_leaves_every_worker_the_main_process_generator():
    trainer = built("mlp-worker_rng_copied")
    loader = trainer.train_loader
    assert loader.worker_init_fn is None  # DataLoader(..., num_workers=2), no worker_init_fn
    loader.split = AugmentedSplit.of(Split(torch.zeros(8, 5), torch.zeros(8)),
                                     loader.split.augmentation, seed=0)
    first, second = draws(loader), draws(loader)
    assert torch.equal(first[0], first[1]) and torch.equal(first[0], second[0])
    assert first[0].abs().sum() > 0  # they are augmented, identically
    # the twin carries the patch disarmed: its loader reseeds
    assert built("mlp-worker_rng_copied", armed=False).train_loader.worker_init_fn \
        is reseed_dataset_generator


def test_the_image_augmentation_crops_and_adds_noise_per_example():
    trainer = built("resnet-clean-augment_workers2")
    split = trainer.train_loader.split
    x = split.inputs(torch.arange(4))[0]
    plain = Split.inputs(split, torch.arange(4))[0]
    assert x.shape == plain.shape and not torch.equal(x, plain)
    noise = (x - plain).std().item()
    assert 0.2 < noise < 2.0
