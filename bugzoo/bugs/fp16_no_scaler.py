"""fp16_no_scaler: float16 autocast training without a GradScaler."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


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
    taxonomy={
        "A.vanishing_gradient": "partial: gradient entries underflow to zero in fp16",
        "L.bf16_precision": "partial: the fp16 analogue",
    },
    honours_onset=False,
    symptom=("small float16 gradients underflow to zero and those weights stop learning; in larger "
             "models, or with large gradients, steps with inf/NaN gradients are applied instead of "
             "skipped, and the loss ends higher or diverges"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("float16 flushes magnitudes below about 6e-8 to zero (and loses precision below "
                 "6e-5). Under autocast the backward pass runs in float16, so small gradients "
                 "vanish before they reach the float32 weights. GradScaler multiplies the loss by a"
                 " large factor (65536 to start) so gradients stay representable, unscales them "
                 "before the step, and skips steps whose gradients overflowed. The share of flushed"
                 " gradient entries grows as training fits and gradients shrink; AdamW normalises "
                 "each entry's step, so validation loss barely moves, and only the flushed entries "
                 "lose their update."),
    buggy="""\
with torch.autocast("cuda", dtype=torch.float16):
    loss = criterion(model(x), y)
loss.backward()                      # fp16 gradients: small ones underflow to 0
optimizer.step()""",
    fixed="""\
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = criterion(model(x), y)
scaler.scale(loss).backward()        # scaled: gradients stay representable
scaler.step(optimizer)               # unscales; skips steps with inf/NaN gradients
scaler.update()""",
    models=("mlp", "gpt"),
)
