"""The MLP reproducer: Gaussian-mixture classification, a 3-layer MLP, AdamW with warm-up."""

from __future__ import annotations

import torch
from torch import Tensor

from bugzoo.bugs import Delta

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

# Data-pipeline steps the template can be set up with, for the bugs that live in one (the
# harness's tabular pipeline has them; the template's blobs need neither). A delta whose
# settings name a ``PIPELINE`` gets its (template text, text) replacements in both scripts,
# before its own patch; ``fresh_split`` then draws the grader's data as that pipeline does.
# "standardised": each feature in its own unit (0.01 to 1,000), standardised inside the model
# with the training split's statistics. "selected": NOISE_COLUMNS columns of pure noise after
# the informative ones, and the model reads the DIM columns with the largest ANOVA F.
DRAW = "    x, y = centres[blob] + torch.randn(n, DIM), blob % CLASSES\n"
HEAD = "        self.head = nn.Linear(64, CLASSES)\n"
FORWARD = "        return self.head(self.backbone(x))\n"
HOLDOUT = "x_hold, y_hold = make_split(500)" + " " * 20 + "# never trained on: exposes leakage\n"
PIPELINES: dict[str, tuple[tuple[str, str], ...]] = {
    "standardised": (
        ("def make_split(n):\n",
         "scales = 10.0 ** torch.linspace(-2, 3, DIM)  # each feature in its own unit\n\n\n"
         "def make_split(n):\n"),
        (DRAW, DRAW.replace("centres[blob] + torch.randn(n, DIM)",
                            "(centres[blob] + torch.randn(n, DIM)) * scales")),
        (HEAD, HEAD + '        self.register_buffer("mean", torch.zeros(DIM))  # standardisation\n'
                      '        self.register_buffer("std", torch.ones(DIM))\n'),
        (FORWARD, FORWARD.replace("self.backbone(x)", "self.backbone((x - self.mean) / self.std)")),
        ("model = MLP()\n",
         "model = MLP()\n"
         "model.mean, model.std = x_train.mean(0), x_train.std(0)  # the training statistics\n"),
    ),
    "selected": (
        (DRAW, DRAW + "    x = torch.cat([x, torch.randn(n, ${NOISE_COLUMNS})], 1)  # no signal\n"),
        (HOLDOUT, HOLDOUT + '''
x_fit, y_fit = x_train, y_train  # the rows the feature selection is fitted on
# each column's one-way ANOVA F against the classes; its p-value by F's chi-square limit
means = torch.stack([x_fit[y_fit == c].mean(0) for c in range(CLASSES)])
between = torch.bincount(y_fit, minlength=CLASSES)[:, None] * (means - x_fit.mean(0)) ** 2
within = (x_fit - means[y_fit]) ** 2
f = (between.sum(0) / (CLASSES - 1)) / (within.sum(0) / (len(x_fit) - CLASSES))
p_value = torch.special.gammaincc(torch.tensor((CLASSES - 1) / 2), f * (CLASSES - 1) / 2)
keep = f.topk(DIM).indices  # the DIM columns that separate the classes best
'''),
        (HEAD, HEAD + '        self.register_buffer("keep", torch.arange(DIM))  # the columns read\n'),
        (FORWARD, FORWARD.replace("self.backbone(x)", "self.backbone(x[:, self.keep])")),
        ("model = MLP()\n", "model = MLP()\nmodel.keep = keep\n"),
    ),
}

# The task's view of the template (bugzoo.teach.tasks): what a task script trains on, and fresh
# data from the same source for the grader. ``data_source`` repeats the template's first draw.
DESCRIPTION = ("a 3-layer MLP that sorts points of a 16-dimensional Gaussian mixture (16 blobs) "
               "into 4 classes")
SOURCE = "centres"  # the script's global that holds its data source
CLASSES, DIM, BLOBS = 4, 16, 16
SCALES = 10.0 ** torch.linspace(-2, 3, DIM)  # the "standardised" pipeline's units


def data_source(seed: int, settings: dict) -> Tensor:
    """The blob centres a script seeded ``seed`` draws first (``centres`` in the template)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(BLOBS, DIM, generator=generator) * float(settings["SPREAD"])


def fresh_split(centres: Tensor, n: int, seed: int, settings: dict
                ) -> tuple[tuple[Tensor], Tensor]:
    """``n`` new points of the mixture, the model's inputs and their clean labels, from a
    generator seeded ``seed``, drawn through the pipeline the ``settings`` name, if any."""
    generator = torch.Generator().manual_seed(seed)
    blob = torch.randint(0, BLOBS, (n,), generator=generator)
    x = centres[blob] + torch.randn(n, DIM, generator=generator)
    pipeline = settings.get("PIPELINE")
    if pipeline == "standardised":
        x = x * SCALES
    elif pipeline == "selected":
        x = torch.cat([x, torch.randn(n, int(settings["NOISE_COLUMNS"]), generator=generator)], 1)
    return (x,), blob % CLASSES
