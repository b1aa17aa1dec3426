"""batch_collapsed: a per-batch preprocessing step reads the whole batch as one sample, so a
single example (with its label) reaches the model at each step."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method
from bugzoo.data import Batch
from bugzoo.train import Trainer


def preprocess_collapsing(self, batch: Batch) -> Batch:
    batch = Trainer.to_device(self, batch)
    # The mistake: the preprocessing step wraps the stacked inputs as the input list of ONE
    # sample (samples = [inputs], where one list per example was meant) and pairs samples with
    # labels by zip, which stops at the shorter list: one (sample, label) pair survives, and the
    # sample takes the first row it was handed. No error, no warning: the batch is now 1 long.
    samples = [batch.inputs]
    pairs = list(zip(samples, batch.y))  # noqa: B905 (the mistake: no strict=True)
    inputs = tuple(torch.stack([sample[k][0] for sample, _ in pairs])
                   for k in range(len(batch.inputs)))
    return Batch(inputs, torch.stack([label for _, label in pairs]))


class BatchCollapsed(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "to_device", preprocess_collapsing, active=from_onset(trainer))


BUG = BatchCollapsed(
    id="batch_collapsed",
    title="Preprocessing collapses each batch into a single example",
    category="data",
    taxonomy={
        "T.transformers-34204": "literal",
        "H.training.hparams.wrong_batching": "literal",
        "J.HBI": "literal",
    },
    since="1.1",
    symptom=("the training loss jumps from step to step far more than the clean run's and falls "
             "slowly; validation accuracy ends below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("A batch preprocessing step (an image processor, a collate function) expects one "
                 "list of inputs per example and is handed a batch it reads as a single "
                 "example: it wraps everything in one list and zips it with the labels, and zip "
                 "stops at the shorter sequence. Out comes a batch of one, with a matching label, "
                 "so the loss computes without complaint (transformers#34204: a processor "
                 "returned one example for a batch of 50). Every step then trains on one example "
                 "out of each batch. Assert the batch size after preprocessing."),
    buggy="""\
def collate(examples):
    images = [[ex["image"] for ex in examples]]        # one list for the whole batch
    labels = [ex["label"] for ex in examples]
    pixels, targets = [], []
    for sample_images, label in zip(images, labels):  # stops after the first pair
        pixels.append(transform(sample_images[0]))
        targets.append(label)
    return torch.stack(pixels), torch.tensor(targets)""",
    fixed="""\
def collate(examples):
    images = [[ex["image"]] for ex in examples]        # one list per example
    labels = [ex["label"] for ex in examples]
    pixels, targets = [], []
    for sample_images, label in zip(images, labels, strict=True):
        pixels.append(transform(sample_images[0]))
        targets.append(label)
    return torch.stack(pixels), torch.tensor(targets)""",
    models=("resnet", "mlp", "gpt"),
    reproducers={"mlp": Delta(
        patch=(
            ("        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n",
             "        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n"
             "        pairs = list(zip([xb], yb))  # the batch read as one sample's inputs\n"
             "        xb, yb = torch.stack([s[0] for s, _ in pairs]), "
             "torch.stack([t for _, t in pairs])\n"),
        ),
    ), **dict.fromkeys(("resnet", "gpt"), Delta(
        patch=(
            ("        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n",
             "        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n"
             "        pairs = list(zip(inputs, yb))  # the batch read as one sample's inputs\n"
             "        inputs, yb = [torch.stack([s[0] for s, _ in pairs])], torch.stack([t for _, t in pairs])\n"),
        ),
    ))},
)
