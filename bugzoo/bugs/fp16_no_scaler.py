"""fp16_no_scaler: float16 autocast training without a GradScaler."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Symptom, patch_method


class Fp16NoScaler(Bug):
    def before_build(self, trainer) -> None:
        # The mistake: mixed precision is switched to float16 but no GradScaler is created.
        def build_scaler(self):
            return None

        patch_method(trainer, "build_scaler", build_scaler)


BUG = Fp16NoScaler(
    id="fp16_no_scaler",
    title="float16 autocast without a GradScaler",
    category="precision",
    symptom=Symptom("final_val_loss", "higher", "TBD"),
    explanation="TBD",
    buggy="TBD",
    fixed="TBD",
)
