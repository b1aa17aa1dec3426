"""init_too_small: every Linear weight re-initialised with a tiny fixed std (a deep plain MLP,
the gpt)."""

from __future__ import annotations

from bugzoo.bugs import SetupDelta
from bugzoo.bugs.base import Delta, SymptomCheck
from bugzoo.bugs.init_too_large import FixedStdInit

BUG = FixedStdInit(
    id="init_too_small",
    title="Weight initialisation std too small",
    category="model",
    taxonomy={
        "H.model.type.wrong_weights_init": "literal",
        "A.vanishing_gradient": "literal",
        "J.WCI": "literal",
    },
    honours_onset=False,
    symptom=("activations and gradients vanish through the layers: the loss sits at or near "
             "log(C) for a long plateau, then Adam slowly rescales the weights; validation loss "
             "ends well above the clean run's (accuracy lower too)"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("With std=0.01 each 128-wide ReLU layer shrinks the activation scale by about "
                 "0.01*sqrt(128/2)=0.08; after eight layers the signal is ~1e-9 of the input. "
                 "The output is constant and the backward signal vanishes just as fast: the "
                 "network sits on the input-independent solution until Adam's per-parameter "
                 "normalisation slowly rescales the weights, and it ends well behind a "
                 "properly initialised one. The gpt's own init is already a fixed std of 0.02, "
                 "so its scenario plants 0.001: its residual stream and tied embedding start "
                 "near zero, and it ends behind a clean run."),
    buggy="""\
for m in model.modules():
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0.0, 0.01)""",
    fixed="""\
for m in model.modules():
    if isinstance(m, nn.Linear):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")   # std = sqrt(2 / fan_in)""",
    models=("mlp", "gpt"),
    params={
        "std": 0.01,
    },
    patches_only=False,  # it also edits the built run directly
    reproducers={"mlp": SetupDelta(
        setup=(("nn.Dropout(0.2),\n"
                "                                      nn.Linear(64, 64), nn.ReLU())",
                "nn.Dropout(0.2), *(  # 8 hidden layers\n"
                "            layer for _ in range(7)"
                " for layer in (nn.Linear(64, 64), nn.ReLU())))"),),
        patch=(("model = MLP()\n",
                "model = MLP()\n"
                "for m in model.modules():\n"
                "    if isinstance(m, nn.Linear):\n"
                "        nn.init.normal_(m.weight, 0.0, 0.01)\n"),),
    ), "gpt": Delta(
        # the scenario's std: the gpt's own init is already a fixed 0.02
        patch=(("model = GPT()\n",
                "model = GPT()\n"
                "for m in model.modules():\n"
                "    if isinstance(m, nn.Linear):\n"
                "        nn.init.normal_(m.weight, 0.0, 0.001)\n"),),
    )},
)
