"""Loss, optimiser, evaluation and tensor-layout bugs: each plant does the literal thing (the
built loss, optimiser, metric or forward pass), checked on a built run or a few steps."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.models.transformer import SelfAttention
from bugzoo.train import Trainer, count_correct, measure


def built(scenario: str, *overrides: str, armed: bool = True) -> Trainer:
    """The scenario's run, built (not trained), with its bug planted (``armed=False``: its
    disarmed twin)."""
    cfg = compose_run([f"scenario={scenario}", "harness.device=cpu", *overrides])
    return Trainer(cfg, get_bug(cfg.bug.id), armed=armed).build()


def logits_and_labels(rows: int = 64, classes: int = 6):
    g = torch.Generator().manual_seed(0)
    return torch.randn(rows, classes, generator=g) * 3, torch.randint(classes, (rows,),
                                                                      generator=g)


def test_nll_on_logits_takes_minus_the_raw_logit():
    logits, y = logits_and_labels()
    buggy = built("mlp-nll_on_logits")
    assert isinstance(buggy.loss_fn, nn.NLLLoss)
    loss = buggy.compute_loss(logits, y)
    assert torch.allclose(loss, -logits[torch.arange(len(y)), y].mean())
    assert loss < 0  # raw logits: unbounded below, unlike a log-probability's -log p >= 0
    twin = built("mlp-nll_on_logits", armed=False)
    assert torch.allclose(twin.compute_loss(logits, y), F.cross_entropy(logits, y))


def test_mse_for_classification_regresses_one_hot_labels():
    logits, y = logits_and_labels()
    buggy = built("mlp-mse_for_classification")
    expected = ((logits - F.one_hot(y, 6).float()) ** 2).mean()
    assert torch.allclose(buggy.compute_loss(logits, y), expected)
    twin = built("mlp-mse_for_classification", armed=False)
    assert torch.allclose(twin.compute_loss(logits, y), F.cross_entropy(logits, y))


def test_sgd_with_adam_lr_is_plain_sgd_at_adamws_rate():
    buggy = built("mlp-sgd_with_adam_lr")
    (group,) = buggy.optimizer.param_groups
    assert type(buggy.optimizer) is torch.optim.SGD
    assert group["momentum"] == 0 and group["initial_lr"] == buggy.cfg.optim.lr
    assert buggy.cfg.optim.name == "adamw"  # the settings still describe the tuned AdamW
    assert type(built("mlp-sgd_with_adam_lr", armed=False).optimizer) is torch.optim.AdamW


def test_accuracy_wrong_counts_a_broadcast_table_from_its_onset():
    y = torch.tensor([0, 0, 1, 2, 2, 2])
    perfect = F.one_hot(y, 3).float()  # every row right: 6 correct
    assert count_correct(perfect, y) == 6
    trainer = built("mlp-accuracy_wrong", "bug.onset=5")
    assert trainer.count_correct(perfect, y) == 6  # before the onset: the clean count
    trainer.step = 5
    assert trainer.count_correct(perfect, y) == 2 * 2 + 1 + 3 * 3  # [6, 1] == [6]: 14 pairs
    _, reported = trainer.evaluate()  # the loop's validation accuracy: a count of pairs
    _, holdout = measure(trainer.model, trainer.data.holdout, trainer.device)
    assert reported > 1 >= holdout  # the harness' holdout measurement keeps the clean count


def test_functional_dropout_stays_on_in_eval_mode():
    for scenario in ("mlp-functional_dropout_in_eval", "transformer-functional_dropout_in_eval"):
        buggy, twin = built(scenario), built(scenario, armed=False)
        batch = next(iter(buggy.val_loader))
        twin.model.load_state_dict(buggy.model.state_dict())
        for trainer in (buggy, twin):
            trainer.model.eval()
        with torch.no_grad():
            first, second = buggy.forward(batch), buggy.forward(batch)
            clean = twin.forward(batch)
        assert not first.equal(second), scenario  # eval() was called; dropout ignored it
        assert clean.equal(twin.forward(batch)), scenario
        buggy.model.train()
        torch.manual_seed(1)
        trained = buggy.forward(batch)
        twin.model.train()
        torch.manual_seed(1)
        assert trained.equal(twin.forward(batch)), scenario  # training is unchanged


def test_rnn_time_major_view_mixes_reviews():
    """A review's summary depends on the other reviews of its batch, which a batch-first LSTM
    (and a correct transpose) never lets happen."""
    batch = next(iter(built("lstm-rnn_time_major_view").val_loader))
    tokens, lengths = batch.inputs
    for armed, mixes in ((True, True), (False, False)):
        encoder = built("lstm-rnn_time_major_view", armed=armed).model.backbone
        with torch.no_grad():
            whole = encoder(tokens[:8], lengths[:8])
            other = encoder(torch.cat([tokens[:4], tokens[8:12]]),
                            torch.cat([lengths[:4], lengths[8:12]]))
        assert torch.allclose(whole[:4], other[:4], atol=1e-5) is not mixes


def test_heads_merged_without_transpose_breaks_permutation_equivariance():
    """Self-attention without position embeddings is permutation-equivariant: permuting the
    tokens permutes the outputs. Merging heads without the transpose ties each output row to
    other positions, so it is not."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 10, 32, generator=g)
    padding = torch.zeros(3, 10, dtype=torch.bool)
    perm = torch.randperm(10, generator=g)
    for armed, equivariant in ((True, False), (False, True)):
        trainer = built("transformer-heads_merged_without_transpose", armed=armed)
        attentions = [m for m in trainer.model.modules() if isinstance(m, SelfAttention)]
        assert len(attentions) == 2
        with torch.no_grad():
            out, permuted = attentions[0](x, padding), attentions[0](x[:, perm], padding)
        assert torch.allclose(out[:, perm], permuted, atol=1e-5) is equivariant
