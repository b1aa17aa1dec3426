"""early_stop_best_zero: the early-stopping tracker starts with a best validation loss of 0."""

from __future__ import annotations

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method


def reset_early_stopping(self) -> None:
    # The mistake: the best loss so far starts at 0 instead of infinity. A cross-entropy is never
    # below 0, so no evaluation counts as an improvement and the patience counter only grows.
    self.best_val_loss, self.evals_without_gain = 0.0, 0


class EarlyStopBestZero(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "reset_early_stopping", reset_early_stopping)


BUG = EarlyStopBestZero(
    id="early_stop_best_zero",
    title="Early stopping initialised with best loss 0 instead of infinity",
    category="loop",
    taxonomy={
        "H.training.hparams.suboptimal_epochs": "literal",
        "J.HNE": "partial: the configured number of epochs is right; broken early stopping "
                 "ends training after `patience` evaluations",
        "D.epoch": "partial: training is cut to `patience` evaluations (a sixth of the run in "
                   "its scenarios) by early stopping, not by an epoch count divided by 10-50",
    },
    honours_onset=False,
    symptom=("training ends long before its planned length although the validation loss was "
             "still falling at every evaluation; the model is left undertrained and its final "
             "validation loss is well above a full run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Early stopping keeps the best validation loss seen so far and counts "
                 "evaluations without improvement. Starting the best at 0 rather than infinity "
                 "means `val_loss < best` can never hold for a non-negative loss: every "
                 "evaluation counts as a failure to improve, and the run stops after exactly "
                 "`patience` evaluations, however well it was learning. Nothing errors; the log "
                 "just says early stopping triggered."),
    buggy="""\
best_val_loss, bad_evals = 0.0, 0          # no loss can beat 0
for step in range(steps):
    train_step()
    if (step + 1) % eval_every == 0:
        val_loss = evaluate()
        if val_loss < best_val_loss:
            best_val_loss, bad_evals = val_loss, 0
        else:
            bad_evals += 1
        if bad_evals >= patience:
            break""",
    fixed="""\
best_val_loss, bad_evals = math.inf, 0
for step in range(steps):
    train_step()
    if (step + 1) % eval_every == 0:
        val_loss = evaluate()
        if val_loss < best_val_loss:
            best_val_loss, bad_evals = val_loss, 0
        else:
            bad_evals += 1
        if bad_evals >= patience:
            break""",
    models=("mlp", "lstm", "gpt"),
    since="1.1",
    # the reproducer has no early stopping: the buggy script adds it with the wrong start (the
    # fixed script never stopping is what a correct tracker does there: the validation loss falls
    # at each of its 4 evaluations); patience 2, as in the scenarios
    reproducers={**{model: SetupDelta(
        setup=(  # early stopping in both, with the scenario's patience, from the first loss
            ("losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"
             "best_val, bad_evals, PATIENCE = float(\"inf\"), 0, 2  # early stopping\n\n\n"
             "def note_validation(val_loss):  # evaluations since the best validation loss\n"
             "    global best_val, bad_evals\n"
             "    best_val, bad_evals = ((val_loss, 0) if val_loss < best_val\n"
             "                           else (best_val, bad_evals + 1))\n\n\n"
             f"note_validation({validation}[0])  # the untrained model's loss is first\n"),
            ("while step < STEPS:\n",
             "while step < STEPS and bad_evals < PATIENCE:\n"),
            ("        if step == STEPS:\n",
             "        if step == STEPS or bad_evals >= PATIENCE:\n"),
            (f"val loss/acc {{{validation}}}\")\n",
             f"val loss/acc {{{validation}}}\")\n"
             f"            note_validation({validation}[0])\n"),
        ),
        patch=(
            ('best_val, bad_evals, PATIENCE = float("inf"), 0, 2',
             "best_val, bad_evals, PATIENCE = 0.0, 0, 2"),
        ),
        settings=settings,
    ) for model, validation, settings in (
        # the mlp's blobs overlap, so its loss has a floor above 0
        ("mlp", "evaluate(x_val, y_val)", {"SPREAD": 1.0, "STEPS": 400}),
        ("gpt", "evaluate(val)", {}),
    )}, "lstm": Delta(
        patch=(
            ("losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"
             "best_val, bad_evals, PATIENCE = 0.0, 0, 2  # early stopping\n"),
            ("while step < STEPS:\n",
             "while step < STEPS and bad_evals < PATIENCE:\n"),
            ("        if step == STEPS:\n",
             "        if step == STEPS or bad_evals >= PATIENCE:\n"),
            ("val loss/acc {evaluate(val)}\")\n",
             "val loss/acc {evaluate(val)}\")\n"
             "            val_loss = evaluate(val)[0]\n"
             "            best_val, bad_evals = ((val_loss, 0) if val_loss < best_val\n"
             "                                   else (best_val, bad_evals + 1))\n"),
        ),
    )},
)
