"""too_few_epochs: the run is configured for a tenth of the training it needs (a typo'd epoch
count)."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck


class TooFewEpochs(Bug):
    def before_build(self, trainer) -> None:
        # The mistake lives in the configuration: the epoch count is a typo'd value (3 written
        # for 30), so the run, and the schedule built for its length, is a tenth as long.
        trainer.steps = max(1, trainer.steps // int(trainer.cfg.bug.params.divide_by))


BUG = TooFewEpochs(
    id="too_few_epochs",
    title="Far too few epochs (a typo'd epoch count)",
    category="optim",
    taxonomy={
        "H.training.hparams.suboptimal_epochs": "literal",
        "J.HNE": "literal",
        "D.epoch": "literal",
    },
    honours_onset=False,
    since="1.1",
    symptom=("the run finishes almost at once and without error, its learning-rate schedule "
             "complete, while the training and validation loss were still falling steeply: "
             "the final validation loss is far above a full run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("The number of epochs (or steps) is a hyperparameter like any other, and the "
                 "one the fault studies count most often. Set a factor of ten too low, the "
                 "schedule still warms up and decays over the shortened run, so every curve "
                 "looks finished: nothing diverges, the loss is simply still high. The tell is "
                 "a validation loss that was still improving at the last evaluation."),
    buggy="""\
EPOCHS = 3                    # meant 30
scheduler = OneCycleLR(optimizer, max_lr=1e-2, total_steps=EPOCHS * len(loader))
for epoch in range(EPOCHS):
    ...""",
    fixed="""\
EPOCHS = 30
scheduler = OneCycleLR(optimizer, max_lr=1e-2, total_steps=EPOCHS * len(loader))
for epoch in range(EPOCHS):
    ...""",
    models=("mlp", "lstm", "gpt"),
    params={
        "divide_by": 10,  # DeepFD seeds this fault by dividing the epochs by 10 to 50
    },
    reproducers={"mlp": Delta(
        patch=(
            # the run length typed a factor of ten short (20 for the template's 200)
            ("STEPS, BATCH, LR, EVAL_EVERY, CLASSES, DIM = ${STEPS}, 32,",
             "STEPS, BATCH, LR, EVAL_EVERY, CLASSES, DIM = 20, 32,"),
        ),
    ), "lstm": Delta(
        patch=(
            ("STEPS, BATCH, LR, EVAL_EVERY = ${STEPS}, 64,",
             "STEPS, BATCH, LR, EVAL_EVERY = 20, 64,"),
        ),
    ), "gpt": Delta(
        patch=(
            ("STEPS, BATCH, LR, EVAL_EVERY, DIM, HEADS = ${STEPS}, 32,",
             "STEPS, BATCH, LR, EVAL_EVERY, DIM, HEADS = 30, 32,"),
        ),
    )},
    patches_only=False,  # it also edits the built run directly
)
