"""Script text the reproducer templates share (the mlp's came first and keeps its own: its
bugs' patches match its text).

``LOOP``, the training loop and summary a template ends with, needs ``model``, ``optimizer``,
``scheduler``, ``loss_fn`` and the splits ``train``, ``val`` and ``hold``, each a tuple of the
model's inputs followed by the labels; it is a classifier's ``EVALUATE`` and the ``TRAIN`` loop
every template shares. ``review_lexicon`` and ``fresh_reviews`` are the task
grader's view of ``REVIEWS`` (the same draws, from a generator of its own); a family's
``data_source`` and ``fresh_split`` take the task's settings whether or not they use them.
"""

import torch
from torch import Tensor

from bugzoo.bugs import Delta

# the docstring and imports a script starts with
HEADER = '''\
"""${TITLE}: ${VARIANT} reproducer (bugzoo scenario ${SCENARIO}, plain PyTorch, CPU, seconds).

${PURPOSE}
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
'''

# how a classifier is measured on a split: its cross-entropy and accuracy
EVALUATE = '''

def evaluate(split):
    *inputs, y = split
    model.eval()
    with torch.no_grad():
        logits = model(*inputs)
        result = F.cross_entropy(logits, y).item(), (logits.argmax(-1) == y).float().mean().item()
    model.train()
    return result
'''

# the training loop and the summary a template ends with, after its ``evaluate``
TRAIN = '''

losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0
while step < STEPS:
    order = torch.randperm(len(train[-1]))
    for i in range(0, len(order) - BATCH + 1, BATCH):
        if step == STEPS:
            break
        *inputs, yb = (t[order[i:i + BATCH]] for t in train)
        optimizer.zero_grad()
        loss = loss_fn(model(*inputs), yb)
        loss.backward()
        grad_norms.append(torch.stack([p.grad.norm() for p in model.parameters()
                                       if p.grad is not None]).norm().item())
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        modes.append(model.training)
        nonfinite |= not (math.isfinite(losses[-1]) and math.isfinite(grad_norms[-1]))
        step += 1
        if step % EVAL_EVERY == 0:
            print(f"step {step:4d}  loss {losses[-1]:.4f}  val loss/acc {evaluate(val)}")

val_loss, val_acc = evaluate(val)
summary = {"final_val_loss": val_loss, "final_val_acc": val_acc, "initial_loss": losses[0],
           "val_holdout_gap": val_acc - evaluate(hold)[1],
           "final_grad_norm": sorted(grad_norms[-10:])[5], "nonfinite": int(nonfinite),
           "final_lr": optimizer.param_groups[0]["lr"], "train_mode_frac": sum(modes) / len(modes)}
print(f"SYMPTOM ${METRIC}={summary['${METRIC}']:.6g}")
'''
LOOP = EVALUATE + TRAIN

# AdamW with 20 warm-up steps, then cosine decay over the run, as in the mlp's template
ADAMW = '''optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / 20, 0.5 * (
    1 + math.cos(math.pi * min(s / STEPS, 1.0)))))
'''
# a classifier's loss: cross-entropy of the logits against the labels
LOSS = '''

def loss_fn(logits, y):
    return F.cross_entropy(logits, y)
'''
OPTIMIZER = ADAMW + LOSS

# Reviews for the sequence models: filler words with up to three sentiment phrases, one per
# third of the review; a negated phrase uses the opposite word, so every phrase agrees with the
# label. ``lexicon`` (which id is which kind of word) is the data source a task keeps.
REVIEWS = '''VOCAB, MAX_LEN, FILLER = 154, 32, 120  # id 0 pads
lexicon = torch.randperm(VOCAB - 1) + 1
positive, negative, negations, filler = lexicon[:15], lexicon[15:30], lexicon[30:33], lexicon[33:]


def make_split(n):
    y = torch.randint(0, 2, (n,))
    lengths = torch.randint(6, MAX_LEN + 1, (n,))
    x = filler[torch.randint(0, FILLER, (n, MAX_LEN))]
    x[torch.arange(MAX_LEN) >= lengths[:, None]] = 0
    rows, third = torch.arange(n), lengths // 3
    for k in range(3):  # phrase k lies in the k-th third: phrases never overlap
        at = k * third + 1 + (torch.rand(n) * (third - 1)).long()
        used = (k == 0) | (torch.rand(n) < 0.5)
        negated = used & (torch.rand(n) < ${NEGATION})
        word = torch.where((y == 1) != negated, positive[torch.randint(0, 15, (n,))],
                           negative[torch.randint(0, 15, (n,))])
        x[rows, at] = torch.where(used, word, x[rows, at])
        x[rows, at - 1] = torch.where(negated, negations[torch.randint(0, 3, (n,))],
                                      x[rows, at - 1])
    return x, lengths, y


train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)
'''
VOCAB, MAX_LEN, FILLER = 154, 32, 120


def review_lexicon(seed: int, settings: dict) -> Tensor:
    """The task's view of ``REVIEWS``: the lexicon a script seeded ``seed`` draws first."""
    return torch.randperm(VOCAB - 1, generator=torch.Generator().manual_seed(seed)) + 1


def fresh_reviews(lexicon: Tensor, n: int, seed: int, settings: dict
                  ) -> tuple[tuple[Tensor, Tensor], Tensor]:
    """``n`` new reviews drawn as ``REVIEWS``'s ``make_split`` draws them, from a generator
    seeded ``seed``: the model's inputs (tokens, lengths) and the labels."""
    g = torch.Generator().manual_seed(seed)
    positive, negative = lexicon[:15], lexicon[15:30]
    negations, filler = lexicon[30:33], lexicon[33:]
    y = torch.randint(0, 2, (n,), generator=g)
    lengths = torch.randint(6, MAX_LEN + 1, (n,), generator=g)
    x = filler[torch.randint(0, FILLER, (n, MAX_LEN), generator=g)]
    x[torch.arange(MAX_LEN) >= lengths[:, None]] = 0
    rows, third = torch.arange(n), lengths // 3
    for k in range(3):
        at = k * third + 1 + (torch.rand(n, generator=g) * (third - 1)).long()
        used = (k == 0) | (torch.rand(n, generator=g) < 0.5)
        negated = used & (torch.rand(n, generator=g) < float(settings["NEGATION"]))
        word = torch.where((y == 1) != negated, positive[torch.randint(0, 15, (n,), generator=g)],
                           negative[torch.randint(0, 15, (n,), generator=g)])
        x[rows, at] = torch.where(used, word, x[rows, at])
        x[rows, at - 1] = torch.where(negated, negations[torch.randint(0, 3, (n,), generator=g)],
                                      x[rows, at - 1])
    return (x, lengths), y

# healthy variants every template with LOOP has: clip the gradient norm at 1 (``clip1``)
CLIP1 = Delta((("        loss.backward()\n",
                "        loss.backward()\n"
                "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"),))
