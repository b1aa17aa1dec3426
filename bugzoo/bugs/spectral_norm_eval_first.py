"""spectral_norm_eval_first: the legacy ``torch.nn.utils.spectral_norm`` meets an evaluation
before training (TrainCheck's pytorch-51800)."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Bug, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_model_with_legacy_spectral_norm(self) -> nn.Module:
    # The mistake: spectral normalisation through the legacy hook API, copied from an older
    # tutorial. It starts its power iteration from random vectors and refines them only on a
    # forward in training mode, so an evaluation before the first training step divides each
    # weight by u^T W v of two random unit vectors: a tiny (or negative) "largest singular
    # value".
    model = build_model(self.cfg.model.name, self.data,
                        **{**self.cfg.model.params, "spectral_norm": False})
    for layer in list(model.backbone.modules()):
        if isinstance(layer, nn.Linear | nn.Conv2d):
            nn.utils.spectral_norm(layer)
    return model


class SpectralNormEvalFirst(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_model_with_legacy_spectral_norm)


BUG = SpectralNormEvalFirst(
    id="spectral_norm_eval_first",
    title="Legacy spectral_norm evaluated before its first training forward",
    category="eval",
    taxonomy={"T.pytorch-51800": "literal"},
    honours_onset=False,
    onset_note="it shows only in an evaluation of the untrained model (harness.eval_at_start)",
    symptom=("the baseline evaluation before training reports a validation loss far above the "
             "chance level log(C) an untrained classifier should score; once training starts "
             "the curves look normal"),
    check=SymptomCheck("initial_val_loss", "higher"),
    explanation=("torch.nn.utils.spectral_norm divides a weight by an estimate of its largest "
                 "singular value, u^T W v, and refines u and v by power iteration only on "
                 "forwards in training mode; at registration they are random. If the first "
                 "forward runs in eval mode (a baseline evaluation before training), the "
                 "estimate is that of two random vectors, far too small, and every normalised "
                 "layer scales its output up by orders of magnitude. The parametrization API "
                 "(torch.nn.utils.parametrizations.spectral_norm) runs the power iteration "
                 "when it is registered."),
    buggy="""\
for layer in model.backbone:
    if isinstance(layer, nn.Linear):
        nn.utils.spectral_norm(layer)          # the legacy hook API
model.eval()
baseline = evaluate(model, val_loader)         # before any training step""",
    fixed="""\
for layer in model.backbone:
    if isinstance(layer, nn.Linear):
        nn.utils.parametrizations.spectral_norm(layer)
model.eval()
baseline = evaluate(model, val_loader)""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("legacy spectral_norm on a linear layer evaluated before training: the"
                          " causal LM has no spectral norm")},
    since="1.1",
    reproducers={model: SetupDelta(
        setup=(
            (built,
             f"{built}for layer in list(model.backbone.modules()):  # spectral normalisation\n"
             f"    if isinstance(layer, nn.{kind}):\n"
             "        nn.utils.parametrizations.spectral_norm(layer)\n"),
            ("losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             f"initial_val_loss = evaluate({val})[0]  # the untrained model's baseline\n"
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"),
            ('"initial_loss": losses[0],',
             '"initial_loss": losses[0], "initial_val_loss": initial_val_loss,'),
        ),
        patch=(("nn.utils.parametrizations.spectral_norm(layer)",
                "nn.utils.spectral_norm(layer)"),),
    ) for model, built, kind, val in (("mlp", "model = MLP()\n", "Linear", "x_val, y_val"),
                                      ("resnet", "model = ResNet(mean, std)\n", "Conv2d", "val"))},
)
