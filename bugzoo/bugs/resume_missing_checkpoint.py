"""resume_missing_checkpoint: a restarted job looks for its checkpoint at the wrong path, finds
nothing, and silently trains on from freshly built parts."""

from __future__ import annotations

import os

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method
from bugzoo.train import Trainer


def resume(self, checkpoint: dict) -> None:
    # The mistake: the job saved its checkpoint (handed in here) in its own run folder, but the
    # resume code builds the path from the output root. Nothing is there, the `if` skips the
    # load without a word, and the freshly built model, optimizer and schedule train on.
    path = os.path.join(self.cfg.harness.out_dir, "checkpoints", "last.pt")
    if os.path.exists(path):
        Trainer.resume(self, torch.load(path))


class ResumeMissingCheckpoint(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "resume", resume, active=from_onset(trainer))


BUG = ResumeMissingCheckpoint(
    id="resume_missing_checkpoint",
    title="Resume looks for the checkpoint at the wrong path and silently starts over",
    category="loop",
    taxonomy={
        "H.training.process.missing_checkpoint": "literal",
        "H.model.type.wrong_model_init": "partial: the model is restored wrongly (it keeps its "
                                         "fresh initial weights instead of the checkpoint's); "
                                         "the initialisation itself is correct",
    },
    symptom=("right after the job restarts the training loss jumps back to its value at the "
             "start of training (about log C) and the learning curve starts over; with only "
             "the remaining steps to learn, the run ends with a higher validation loss"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Resume code that guards the load with `if os.path.exists(path)` turns a wrong "
                 "path (a different folder, a renamed run, a changed job id) into a silent "
                 "no-op: the restarted job keeps the parts it has just built, random weights, an "
                 "empty optimizer and a schedule at its first step, while its step counter says "
                 "it is half-way through. The work before the preemption is lost and the run "
                 "finishes undertrained."),
    buggy="""\
model, optimizer, scheduler = build()        # the restarted job
path = os.path.join(cfg.out_dir, "last.pt")  # saved under cfg.out_dir / run_name
if os.path.exists(path):
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
train(start_step=start_step)""",
    fixed="""\
model, optimizer, scheduler = build()        # the restarted job
path = os.path.join(cfg.out_dir, run_name, "last.pt")
ckpt = torch.load(path)                      # fails loudly if it is missing
model.load_state_dict(ckpt["model"])
optimizer.load_state_dict(ckpt["optimizer"])
scheduler.load_state_dict(ckpt["scheduler"])
train(start_step=ckpt["step"])""",
    models=("mlp", "transformer", "gpt"),
    onset="${harness.restart_at}",
    onset_note="the step at which the job is preempted and should resume from its checkpoint",
    since="1.1",
    # the reproducer has no checkpointing, and a complete resume is the run that never stopped:
    # the buggy script has the restart, with the freshly built parts nothing is loaded into
    reproducers={"mlp": Delta(
        patch=(
            ("        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n",
             "        if step == STEPS // 2:  # the job is preempted here and resumes\n"
             "            model = MLP()\n"
             "            optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)\n"
             "            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, scheduler.lr_lambdas[0])\n"
             "        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n"),
        ),
        # a tenth of the learning rate: the model is still converging when the budget ends, so
        # the half of it that the restart throws away shows; blobs far apart: every draw is
        # learnable to 100%, and the loss measures how far training got, not the draw
        settings={"SPREAD": 4.0, "LR": 1e-3},
    ), "transformer": Delta(
        patch=(
            ("        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n",
             "        if step == STEPS // 2:  # the job is preempted here and resumes\n"
             "            model = Classifier()\n"
             "            optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)\n"
             "            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, scheduler.lr_lambdas[0])\n"
             "        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n"),
        ),
        # reviews with more negated phrases (0.4 of them, against 0.15): the encoder needs most
        # of its 400 steps to learn how a negation flips a phrase, so the model the restart
        # builds afresh has not learned it in the 200 left. On the default reviews the clean
        # encoder has stopped improving by the restart, and losing the first half costs nothing
        settings={"NEGATION": 0.4},
    ), "gpt": Delta(
        patch=(
            ("        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n",
             "        if step == STEPS // 2:  # the job is preempted here and resumes\n"
             "            model = GPT()\n"
             "            optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)\n"
             "            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, scheduler.lr_lambdas[0])\n"
             "        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n"),
        ),
    )},
)
