"""The causal language model and its bugs: the clean model's promises (causal, tied, padding-
blind, log(V) at the start, an exact next-token loss under accumulation, generation judged by
the source) and each LLM-era plant breaking exactly the promise its card names."""

from __future__ import annotations

import math

import pytest
import torch

from bugzoo.bugs import get_bug
from bugzoo.config import compose_run
from bugzoo.data.language import EOS_ID, PAD_ID, Source
from bugzoo.harness.runner import generation_check
from bugzoo.train import IGNORE, Trainer, mask_padding, shift_labels


def built(scenario: str = "gpt-clean", *overrides: str, armed: bool = True) -> Trainer:
    """The scenario's run, built (not trained), its bug planted (``armed=False``: disarmed)."""
    cfg = compose_run([f"scenario={scenario}", "harness.device=cpu", *overrides])
    bug = get_bug(cfg.bug.id) if cfg.get("bug") else None
    return Trainer(cfg, bug, armed=armed).build()


def sentences(trainer: Trainer, rows: int = 8) -> torch.Tensor:
    split = trainer.data.val
    return split.x[:rows, : int(split.lengths[:rows].max())]


def test_the_untrained_model_is_tied_and_starts_at_log_vocabulary():
    trainer = built()
    model, data = trainer.model, trainer.data
    assert model.head.weight is model.backbone.tokens.weight
    batch = next(iter(trainer.train_loader))
    loss = trainer.compute_loss(trainer.forward(batch), trainer.targets(batch))
    assert abs(loss.item() - math.log(data.vocab_size)) < 0.05


def test_targets_are_the_next_real_token():
    labels = torch.tensor([[1, 5, 6, EOS_ID, PAD_ID], [1, 7, EOS_ID, PAD_ID, PAD_ID]])
    assert mask_padding(shift_labels(labels), PAD_ID).tolist() == [
        [5, 6, EOS_ID, IGNORE, IGNORE], [7, EOS_ID, IGNORE, IGNORE, IGNORE]]


def test_a_position_sees_only_the_tokens_before_it_until_the_mask_goes_missing():
    for armed, leaks in ((False, False), (True, True)):
        model = built("gpt-missing_causal_mask", armed=armed).model.eval()
        tokens = sentences(built())
        changed = tokens.clone()
        changed[:, 5] = changed[:, 5] % 20 + 3  # another token at position 5
        with torch.no_grad():
            before, after = model(tokens)[:, :5], model(changed)[:, :5]
        assert torch.allclose(before, after, atol=1e-6) != leaks


def test_a_rows_logits_do_not_depend_on_its_left_padding_until_positions_ignore_it():
    for armed in (False, True):
        model = built("gpt-left_pad_positions", armed=armed).model.eval()
        alone = torch.tensor([[1, 4, 40, 41]])
        padded = torch.cat([torch.full((1, 3), PAD_ID), alone], dim=1)
        with torch.no_grad():
            same = torch.allclose(model(alone), model(padded)[:, 3:], atol=1e-5)
        assert same != armed
    # training pads on the right, where both rules agree: the bug is invisible there
    trainer = built("gpt-left_pad_positions")
    batch = next(iter(trainer.train_loader))
    twin = built("gpt-left_pad_positions", armed=False)
    twin.model.load_state_dict(trainer.model.state_dict())
    real = trainer.targets(batch) != IGNORE
    with torch.no_grad():
        assert torch.allclose(trainer.forward(batch)[real], twin.forward(batch)[real], atol=1e-5)


def accumulated_gradient(trainer: Trainer) -> torch.Tensor:
    trainer.batches = trainer.epochs()
    trainer.data_s = 0.0
    trainer.train_step()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters()])


def test_accumulated_micro_batches_give_the_full_batchs_gradient_until_means_are_averaged():
    whole = built("gpt-clean", "harness.batch_size=32")
    full = accumulated_gradient(whole)
    for armed, exact in ((False, True), (True, False)):
        # the same 32 sentences, as 8 micro-batches of 4
        micro = built("gpt-grad_accum_token_norm", armed=armed)
        assert micro.cfg.harness.batch_size * micro.cfg.optim.accumulate == 32
        micro.model.load_state_dict(whole.model.state_dict())
        assert torch.allclose(accumulated_gradient(micro), full, atol=1e-6) == exact


@pytest.mark.parametrize(("scenario", "expected"), [
    ("gpt-labels_not_shifted", lambda labels: labels),
    ("gpt-labels_double_shift", lambda labels: torch.cat(
        [labels[:, 2:], torch.full_like(labels[:, :1], PAD_ID),
         torch.full_like(labels[:, :1], IGNORE)], dim=1)),
    ("gpt-loss_on_padding", lambda labels: shift_labels(labels)),
])
def test_target_plants_score_what_their_card_says(scenario, expected):
    buggy, twin = built(scenario), built(scenario, armed=False)
    batch = next(iter(buggy.train_loader))
    labels = batch.y[:, : batch.inputs[0].shape[1]]
    wanted = expected(labels)
    if scenario != "gpt-loss_on_padding":
        wanted = mask_padding(wanted, PAD_ID)
    assert torch.equal(buggy.targets(batch), wanted)
    assert torch.equal(twin.targets(batch), mask_padding(shift_labels(labels), PAD_ID))


def test_attention_unscaled_multiplies_the_scores_by_sqrt_head_width():
    buggy, twin = built("gpt-attention_unscaled"), built("gpt-attention_unscaled", armed=False)
    q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 4, 5, 16)
    attention = buggy.model.backbone.layers[0].attn
    reference = twin.model.backbone.layers[0].attn
    assert torch.allclose(attention.scores(q, k), reference.scores(q, k) * 4, atol=1e-5)


def test_a_resized_head_is_a_new_untied_matrix():
    buggy = built("gpt-tied_embeddings_broken")
    twin = built("gpt-tied_embeddings_broken", armed=False)
    assert buggy.model.head.weight is not buggy.model.backbone.tokens.weight
    assert twin.model.head.weight is twin.model.backbone.tokens.weight
    size = sum(p.numel() for p in buggy.model.parameters())
    assert size - sum(p.numel() for p in twin.model.parameters()) == twin.model.head.weight.numel()


def test_generation_writes_until_eos_and_the_source_scores_its_own_sentences_as_possible():
    trainer = built()
    prompts = torch.tensor([[PAD_ID, 1, 4], [1, 5, 40]])
    written, lengths = trainer.generate(prompts, 12, torch.Generator().manual_seed(0))
    for row, start, length in zip(written, (1, 0), lengths.tolist(), strict=True):
        sentence = row[start:start + length]
        assert length <= 12 and (sentence[-1] == EOS_ID or length == 12)
        assert (row[start + length:] == PAD_ID).all()
    source = Source(**trainer.data.info["source"])
    tokens, lengths, _ = source.sample(50, torch.Generator().manual_seed(1))
    judged = source.judge(tokens, lengths, torch.full((50, 1), 3))
    assert judged["impossible_frac"] == 0 and judged["disagreeing_verb_frac"] == 0


def test_the_generation_check_of_an_untrained_model_finds_what_the_source_cannot_write():
    judged = generation_check(built())
    assert judged["impossible_frac"] > 0.5  # uniform over 83 tokens: mostly impossible ones
    assert judged["source_loss"] > 5


def test_generation_ends_even_when_the_model_writes_padding():
    trainer = built()
    with torch.no_grad():  # a head that always writes <pad>: the rows must still end
        trainer.model.head.weight[PAD_ID] += 50
    written, lengths = trainer.generate(torch.tensor([[1, 4]]), 10,
                                        torch.Generator().manual_seed(0))
    assert lengths.tolist() == [10] and written.shape[1] == 10
