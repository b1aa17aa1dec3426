"""The synthetic language for the causal LM: its sentences, and the entropy its source knows."""

from __future__ import annotations

import math

import pytest
import torch

from bugzoo.data import load_dataset
from bugzoo.data.language import BOS_ID, EOS_ID, PAD_ID, Source, make_language


def sentences(n: int, seed: int, source: Source | None = None):
    return (source or Source()).sample(n, torch.Generator().manual_seed(seed))


def test_a_seed_draws_the_same_sentences_and_another_seed_others():
    a, b = make_language(seed=3, n_train=50, n_val=10, n_holdout=10), load_dataset(
        "language", seed=3, n_train=50, n_val=10, n_holdout=10)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.val.y, b.val.y)
    assert not torch.equal(a.train.x, make_language(seed=4, n_train=50, n_val=10,
                                                    n_holdout=10).train.x)
    assert a.info["entropy"] == b.info["entropy"]


def test_a_sentence_is_bos_subject_words_eos_then_padding_and_its_verbs_agree():
    source = Source()
    tokens, lengths, classes = sentences(2000, 0)
    assert ((lengths >= source.min_len + 1) & (lengths <= source.max_len + 1)).all()
    assert set(lengths.tolist()) == set(range(source.min_len + 1, source.max_len + 2))
    assert (tokens[:, 0] == BOS_ID).all()
    assert torch.equal(source.subject_class(tokens[:, 1]), classes)
    positions = torch.arange(tokens.shape[1])
    assert torch.equal(tokens[torch.arange(len(tokens)), lengths - 1],
                       torch.full((len(tokens),), EOS_ID))
    assert (tokens[positions >= lengths[:, None]] == PAD_ID).all()
    words = (positions >= 2) & (positions < lengths[:, None] - 1)
    verb_classes = source.verb_class(tokens)
    is_verb = words & (verb_classes >= 0)
    assert (verb_classes == classes[:, None])[is_verb].all(), "a verb disagrees with its subject"
    assert abs(is_verb.sum() / words.sum() - source.verb_rate) < 0.01
    assert ((tokens >= source.first_filler) | is_verb | ~words).all()
    names = source.vocabulary()
    assert len(names) == source.vocab_size
    assert names[int(tokens[0, 1])] == f"s{int(classes[0])}.{int(tokens[0, 1] - 3) % 4}"


def test_the_sources_loss_on_its_own_sentences_is_its_entropy():
    """E[-log p(token | before)] equals the mean conditional entropy only where the sampler and
    the probabilities agree; another grammar's probabilities on the same sentences do worse."""
    source = Source()
    tokens, lengths, _ = sentences(20_000, 1)
    log_p, entropy, targets = source.conditionals(tokens, lengths)
    loss = -log_p[targets]
    error = float(loss.std()) / math.sqrt(loss.numel())
    assert abs(float(loss.mean()) - float(entropy[targets].mean())) < 4 * error
    other = Source(grammar_seed=1).conditionals(tokens, lengths)[0][targets]
    assert float((-other).mean()) > float(loss.mean()) + 1  # impossible transitions: -inf


def test_tokens_the_source_cannot_produce_have_probability_zero():
    source = Source()
    tokens, lengths, classes = sentences(1, 2)
    wrong_class = (int(classes[0]) + 1) % source.classes
    tokens[0, 2] = source.first_verb + wrong_class * source.verbs_per_class
    log_p, _, _ = source.conditionals(tokens, lengths)
    assert log_p[0, 2] == -math.inf
    assert source.conditionals(tokens, lengths, agreement=False)[0][0, 2] > -math.inf


def test_agreement_is_worth_what_a_verb_class_costs_to_guess():
    data = make_language(n_train=2000, n_val=500, n_holdout=500)
    source = Source()
    for name in ("train", "val", "holdout"):
        split = getattr(data, name)
        floor, local = data.info["entropy"][name], data.info["local_entropy"][name]
        assert 0 < floor < local < math.log(source.vocab_size)
        # each word position may be a verb, whose class costs log(classes) to guess
        words, targets = int((split.lengths - 3).sum()), int((split.lengths - 1).sum())
        expected = source.verb_rate * math.log(source.classes) * words / targets
        assert local - floor == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize(("setting", "message"), [
    ({"min_len": 1}, "min_len"), ({"min_len": 9, "max_len": 8}, "min_len"),
    ({"verb_rate": 1.0}, "verb_rate"), ({"branching": 0}, "branching")])
def test_a_bad_setting_is_named(setting, message):
    with pytest.raises(ValueError, match=message):
        Source(**setting)


def test_judge_finds_nothing_wrong_with_the_sources_own_sentences_and_sees_broken_agreement():
    source = Source()
    tokens, lengths, classes = sentences(5000, 3)
    own = source.judge(tokens, lengths, start=4)
    _, entropy, targets = source.conditionals(tokens, lengths)
    written = targets & (torch.arange(tokens.shape[1]) >= 4)
    assert own["impossible_frac"] == 0 and own["disagreeing_verb_frac"] == 0
    assert own["source_loss"] == pytest.approx(float(entropy[written].mean()), abs=0.02)
    # a writer that forgets the subject: each verb's class drawn anew
    verbs = written & (source.verb_class(tokens) >= 0)
    shuffled = tokens.clone()
    shuffled[verbs] = source.first_verb + torch.randint(
        source.classes * source.verbs_per_class, (int(verbs.sum()),),
        generator=torch.Generator().manual_seed(0))
    forgetful = source.judge(shuffled, lengths, start=4)
    wrong = 1 - 1 / source.classes
    assert forgetful["disagreeing_verb_frac"] == pytest.approx(wrong, abs=0.03)
    assert forgetful["impossible_frac"] == pytest.approx(
        wrong * int(verbs.sum()) / forgetful["tokens"], abs=0.01)
    assert forgetful["source_loss"] > own["source_loss"] + 1
