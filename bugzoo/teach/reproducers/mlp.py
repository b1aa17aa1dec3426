"""The MLP reproducer: Gaussian-mixture classification, a 3-layer MLP, AdamW with warm-up."""

from __future__ import annotations

from bugzoo.teach.reproducers import Delta

DEFAULTS: dict[str, object] = {"STEPS": 200, "LR": 1e-2, "N_TRAIN": 2000, "NOISE": 0.0, "N_VAL": 500,
                               "SPREAD": 2.0}

TEMPLATE = '''\
"""${TITLE}: ${VARIANT} reproducer (bugzoo scenario ${SCENARIO}, plain PyTorch, CPU, seconds).

${PURPOSE}
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
STEPS, BATCH, LR, EVAL_EVERY, CLASSES, DIM = ${STEPS}, 32, ${LR}, 50, 4, 16
centres = torch.randn(16, DIM) * ${SPREAD}  # 16 blobs, 4 per class: not linearly separable


def make_split(n):
    blob = torch.randint(0, 16, (n,))
    x, y = centres[blob] + torch.randn(n, DIM), blob % CLASSES
    flip = torch.rand(n) < ${NOISE}  # label noise makes memorisation visible
    return x, torch.where(flip, torch.randint(0, CLASSES, (n,)), y)


x_train, y_train = make_split(${N_TRAIN})
x_val, y_val = make_split(${N_VAL})
x_hold, y_hold = make_split(500)                    # never trained on: exposes leakage


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Dropout(0.2),
                                      nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, CLASSES)

    def forward(self, x):
        return self.head(self.backbone(x))


model = MLP()
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / 20, 0.5 * (
    1 + math.cos(math.pi * min(s / STEPS, 1.0)))))


def loss_fn(logits, y):
    return F.cross_entropy(logits, y)


def evaluate(x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        result = F.cross_entropy(logits, y).item(), (logits.argmax(-1) == y).float().mean().item()
    model.train()
    return result


losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0
while step < STEPS:
    order = torch.randperm(len(x_train))
    for i in range(0, len(order) - BATCH + 1, BATCH):
        if step == STEPS:
            break
        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
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
            print(f"step {step:4d}  loss {losses[-1]:.4f}  val loss/acc {evaluate(x_val, y_val)}")

val_loss, val_acc = evaluate(x_val, y_val)
summary = {"final_val_loss": val_loss, "final_val_acc": val_acc, "initial_loss": losses[0],
           "val_holdout_gap": val_acc - evaluate(x_hold, y_hold)[1],
           "final_grad_norm": sorted(grad_norms[-10:])[5], "nonfinite": int(nonfinite),
           "final_lr": optimizer.param_groups[0]["lr"], "train_mode_frac": sum(modes) / len(modes)}
print(f"SYMPTOM ${METRIC}={summary['${METRIC}']:.6g}")
'''

CLASS_LINE = "\n\nclass MLP(nn.Module):"
OVERFIT = {"N_TRAIN": 256, "N_VAL": 128, "NOISE": 0.3, "STEPS": 400}  # small noisy train set: memorisation

DELTAS: dict[str, Delta] = {
    "double_softmax": Delta((("return self.head(self.backbone(x))",
                              "return torch.softmax(self.head(self.backbone(x)), dim=-1)"),)),
    "softmax_wrong_dim": Delta((("return self.head(self.backbone(x))",
                                 "return torch.softmax(self.head(self.backbone(x)), dim=0)"),)),
    "missing_zero_grad": Delta((("        optimizer.zero_grad()\n", ""),)),
    "lr_too_high": Delta((("lr=LR, weight_decay", "lr=1e3, weight_decay"),)),
    "log_of_zero": Delta((("return F.cross_entropy(logits, y)",
                           "return F.nll_loss(torch.log(torch.softmax(logits, dim=-1)), y)"),),
                         {"SPREAD": 10.0, "STEPS": 400, "LR": 0.05}),
    "frozen_from_start": Delta((("model = MLP()\n",
                                 "model = MLP()\nfor p in model.backbone.parameters():\n"
                                 "    p.requires_grad = False\n"),)),
    "init_too_large": Delta((("model = MLP()\n",
                              "model = MLP()\nfor m in model.modules():\n"
                              "    if isinstance(m, nn.Linear):\n"
                              "        nn.init.normal_(m.weight, 0.0, 1.0)\n"),)),
    "labels_misaligned": Delta((("x_train, y_train = make_split(${N_TRAIN})\n",
                                 "x_train, y_train = make_split(${N_TRAIN})\n"
                                 "x_train = x_train[torch.randperm(len(x_train))]\n"
                                 "y_train = y_train[torch.randperm(len(y_train))]\n"),)),
    "no_shuffle_sorted": Delta((
        (CLASS_LINE, "by_label = y_train.argsort(stable=True)   # data exported class by class\n"
                     "x_train, y_train = x_train[by_label], y_train[by_label]\n" + CLASS_LINE),
        ("order = torch.randperm(len(x_train))", "order = torch.arange(len(x_train))")),
        {"STEPS": 62}),  # one epoch: the classes arrive one after another
    "scheduler_never_stepped": Delta((("        scheduler.step()\n", ""),)),
    "train_mode_not_restored": Delta((("    model.train()\n    return result",
                                       "    return result"),)),
    "eval_on_train": Delta((("val_loss, val_acc = evaluate(x_val, y_val)",
                             "val_loss, val_acc = evaluate(x_train, y_train)"),), OVERFIT),
    "leakage_val_in_train": Delta(((CLASS_LINE, "x_train, y_train = torch.cat([x_train, x_val]), "
                                                "torch.cat([y_train, y_val])\n" + CLASS_LINE),),
                                  OVERFIT),
}

# Healthy variants of the fixed script, each a change a practitioner makes on purpose; named
# after the harness's clean variants they mirror (scenarios/mlp-clean-<name>.yaml). Offline
# tools that check whole scripts are scored on them as clean runs.
HIDDEN = "nn.Linear(DIM, 64), nn.ReLU(), nn.Dropout(0.2),\n" \
         "                                      nn.Linear(64, 64), nn.ReLU())\n" \
         "        self.head = nn.Linear(64, CLASSES)"
BATCH_LINE = "STEPS, BATCH, LR, EVAL_EVERY, CLASSES, DIM = ${STEPS}, 32,"
HEALTHY: dict[str, Delta] = {
    "batch16": Delta(((BATCH_LINE, BATCH_LINE.replace("32", "16")),)),
    "batch128": Delta(((BATCH_LINE, BATCH_LINE.replace("32", "128")),)),
    "clip1": Delta((("        loss.backward()\n",
                     "        loss.backward()\n"
                     "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"),)),
    "dropout05": Delta((("nn.Dropout(0.2)", "nn.Dropout(0.5)"),)),
    "label_smoothing": Delta((("return F.cross_entropy(logits, y)",
                               "return F.cross_entropy(logits, y, label_smoothing=0.1)"),)),
    "lr_x0p3": Delta((), {"LR": 3e-3}),
    "lr_x3": Delta((), {"LR": 3e-2}),
    "narrow": Delta(((HIDDEN, HIDDEN.replace("64", "16")),)),
    "sgd_momentum": Delta((("torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)",
                            "torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, "
                            "weight_decay=5e-4)"),)),
    "small_data": Delta((), {"N_TRAIN": 300, "N_VAL": 300}),
    "wide": Delta(((HIDDEN, HIDDEN.replace("64", "256")),)),
}
