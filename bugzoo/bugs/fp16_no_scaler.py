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
    symptom=Symptom("mean_zero_grad_frac", "higher",
                    "more gradient entries are exactly zero than in the same fp16 run with a "
                    "scaler: small gradients underflow in float16 and those weights stop "
                    "learning; in larger models or with large gradients, steps with inf/NaN "
                    "gradients are applied instead of skipped"),
    explanation=("float16 flushes magnitudes below about 6e-8 to zero (and loses precision "
                 "below 6e-5). Under autocast the backward pass runs in float16, so small "
                 "gradients vanish before they reach the float32 weights. GradScaler multiplies "
                 "the loss by a large factor (65536 to start) so gradients stay representable, "
                 "unscales them before the step, and skips steps whose gradients overflowed. "
                 "Measured here (mlp, CPU autocast, default 300 steps, seeds 0-4): the share of "
                 "exactly-zero gradient entries is 0.097-0.119 without the scaler against "
                 "0.076-0.092 with it, every buggy run above every clean one; the gap grows as "
                 "training fits and gradients shrink (about 0.007 over the first 50 steps, 0.03 "
                 "after 200), and at 150 steps it is within seed noise. Validation loss and "
                 "accuracy barely move (0.156-0.169 vs 0.157-0.168): AdamW normalises each "
                 "entry's step, so only the flushed entries lose their update. Gradient "
                 "accumulation over 8 micro-batches or batches of 512 did not widen the gap, and "
                 "on the lstm, transformer and resnet the difference stays within 0.003, so the "
                 "bug is listed for the mlp only."),
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
    models=("mlp",),
)
