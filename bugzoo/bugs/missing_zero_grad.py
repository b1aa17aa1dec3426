"""missing_zero_grad: the loop never clears gradients, so they pile up step after step."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, from_onset, patch_method


class MissingZeroGrad(Bug):
    def before_build(self, trainer) -> None:
        # The mistake: the `optimizer.zero_grad()` call is gone from the loop.
        def zero_grad(self) -> None:
            pass

        patch_method(trainer, "zero_grad", zero_grad, active=from_onset(trainer))


BUG = MissingZeroGrad(
    id="missing_zero_grad",
    title="optimizer.zero_grad() never called",
    category="loop",
    taxonomy={
        "H.api.missing_api_call": "literal",
        "T.stackoverflow-60335387": "literal",
        "A.oscillating_loss": "literal",
    },
    symptom=("each step follows the running sum of every gradient so far: the loss oscillates "
             "instead of settling, and the validation loss ends above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("loss.backward() adds into .grad instead of overwriting it. Without a "
                 "zero_grad() per step, the gradient the optimizer sees at step t is the sum of "
                 "all gradients since the last clear: stale directions dominate, the effective "
                 "step grows with t, and training overshoots and oscillates. Adam's per-parameter "
                 "normalisation hides part of the growth in the update size, but not in the "
                 "gradient norm, and the accumulated momentum of old directions still hurts."),
    buggy="""\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()""",
    fixed="""\
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()""",
    onset_note="the step at which the call disappears",
    reproducers={model: Delta(
        patch=(
            ("        optimizer.zero_grad()\n",
             ""),
        ),
        # the resnet: on its clean pictures it fits everything early, later gradients vanish
        # and the stale sum only drifts along growing margins. Noisier pictures keep the
        # gradients coming, so the sum keeps growing in stale directions, and a higher learning
        # rate (which the clean network trains better with) makes Adam's full-size steps along
        # it larger
        settings={"NOISE": 2.0, "LR": 1e-2} if model == "resnet" else {},
    ) for model in ("mlp", "lstm", "transformer", "resnet", "gpt")},
)
