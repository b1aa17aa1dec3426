"""resume_without_optimizer_state: a restarted job restores the model's weights only."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


def resume(self, checkpoint: dict) -> None:
    # The mistake: only the weights come back. optimizer.load_state_dict and
    # scheduler.load_state_dict are never called, so the freshly built AdamW starts with empty
    # moments and the schedule starts its warm-up and cosine decay again from step 0.
    self.model.load_state_dict(checkpoint["model"])


class ResumeWithoutOptimizerState(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "resume", resume, active=from_onset(trainer))


BUG = ResumeWithoutOptimizerState(
    id="resume_without_optimizer_state",
    title="Resume restores the model but not the optimizer and LR schedule",
    category="optim",
    taxonomy={
        "H.api.missing_api_call": "literal",
        "J.APW": "partial: the checkpoint API is used incompletely (calls missing), no call "
                 "is made wrongly",
    },
    symptom=("after the job restarts the learning rate drops, then climbs back through a "
             "warm-up to its peak; the training loss rises for a few dozen steps instead of "
             "continuing its descent, and the run ends unannealed, with a higher validation "
             "loss than an uninterrupted one"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("A checkpoint is more than the weights: AdamW's first and second moments and "
                 "the scheduler's step count are training state too. Restoring only "
                 "model.state_dict() gives the resumed job an optimizer with no history and a "
                 "schedule back at step 0: it warms up to the peak learning rate again and "
                 "decays over the full length, so the annealing that the first part of the run "
                 "had done is undone and the run ends far from annealed."),
    buggy="""\
model, optimizer, scheduler = build()        # the restarted job
ckpt = torch.load(path)
model.load_state_dict(ckpt["model"])
# optimizer and scheduler keep their fresh state
train(start_step=ckpt["step"])""",
    fixed="""\
model, optimizer, scheduler = build()        # the restarted job
ckpt = torch.load(path)
model.load_state_dict(ckpt["model"])
optimizer.load_state_dict(ckpt["optimizer"])
scheduler.load_state_dict(ckpt["scheduler"])
train(start_step=ckpt["step"])""",
    models=("mlp", "transformer", "gpt"),
    onset="${harness.restart_at}",
    onset_note="the step at which the job is preempted and resumes from its checkpoint",
    since="1.1",
    # the reproducer has no checkpointing, and a complete resume is the run that never stopped:
    # the buggy script has the restart, and the resumed job's fresh optimizer and schedule
    # (its weights carry on, as loaded)
    reproducers={"mlp": Delta(
        patch=(
            ("        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n",
             "        if step == STEPS // 2:  # the job is preempted here and resumes\n"
             "            optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)\n"
             "            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, scheduler.lr_lambdas[0])\n"
             "        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n"),
        ),
        # label noise keeps every batch's gradient noisy to the end, so only an annealed
        # learning rate settles the weights; the run that restarts its schedule ends at half
        # the peak (three times the default's), still bouncing on the latest noisy batches.
        # Blobs far apart and a large validation split: the loss floor is the label noise's,
        # the same on every draw
        settings={"NOISE": 0.2, "SPREAD": 4.0, "N_VAL": 20000, "LR": 3e-2},
    ),
    # the transformer's and the gpt's loops share their text, so one patch plants both
    **{model: Delta(
        patch=(
            ("        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n",
             "        if step == STEPS // 2:  # the job is preempted here and resumes\n"
             "            optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)\n"
             "            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, scheduler.lr_lambdas[0])\n"
             "        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n"),
        ),
        settings=settings,
    ) for model, settings in {
        "transformer": {},
        # the cost is the annealing the restarted schedule undoes, so it shows once the model
        # has learnt its language before the end: at 300 steps it is still learning, and the
        # second climb to the peak rate helps it; at 600 the uninterrupted run anneals on its
        # loss floor while the restarted one ends at half the peak rate, a few hundredths of a
        # nat above. 4,000 validation sentences measure that: 300 sentences' loss moves by
        # about as much from one draw to the next
        "gpt": {"STEPS": 600, "N_VAL": 4000},
    }.items()}},
)
