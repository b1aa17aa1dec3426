"""conv_kernel_1x1: the 3x3 convolutions are built with kernel size 1."""

from __future__ import annotations

from torch import nn

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.models import build_model


def build_with_1x1_kernels(self) -> nn.Module:
    model = build_model(self.cfg.model.name, self.data, **self.cfg.model.params)
    for parent in list(model.modules()):
        for name, conv in list(parent.named_children()):
            if isinstance(conv, nn.Conv2d) and conv.kernel_size == (3, 3):
                # The mistake: kernel_size=1 (and padding 0) where the layer is 3x3
                setattr(parent, name, nn.Conv2d(conv.in_channels, conv.out_channels, 1,
                                                conv.stride, 0, bias=False))
    return model


class ConvKernel1x1(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_model", build_with_1x1_kernels)


BUG = ConvKernel1x1(
    id="conv_kernel_1x1",
    title="Convolutions built with kernel size 1 instead of 3",
    category="model",
    taxonomy={
        "H.model.layer_props.wrong_filter_size": "literal",
        "J.LCF": "literal",
    },
    honours_onset=False,
    symptom=("the network trains without error but its loss levels off high: validation "
             "accuracy ends far below the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("A 1x1 convolution mixes the channels of each pixel on its own; it never looks "
                 "at a neighbour. Stacked, strided and globally pooled, such layers see only the "
                 "distribution of pixel colours, not where they are, so stripes of either "
                 "orientation, checkers and rings with the same colours look alike. The classes "
                 "are told apart by spatial patterns, which this network cannot detect."),
    buggy="""\
self.conv1 = nn.Conv2d(cin, cout, kernel_size=1, stride=stride, padding=0, bias=False)
self.conv2 = nn.Conv2d(cout, cout, kernel_size=1, stride=1, padding=0, bias=False)""",
    fixed="""\
self.conv1 = nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)
self.conv2 = nn.Conv2d(cout, cout, kernel_size=3, stride=1, padding=1, bias=False)""",
    models=("resnet",),
    inapplicable={"gpt": "convolution kernels: the causal LM has no convolutions"},
    since="1.1",
    reproducers={"resnet": Delta(
        patch=(("nn.Conv2d(cin, cout, 3, stride, 1, bias=False)",
                "nn.Conv2d(cin, cout, 1, stride, 0, bias=False)"),
               ("nn.Conv2d(cout, cout, 3, 1, 1, bias=False)",
                "nn.Conv2d(cout, cout, 1, 1, 0, bias=False)"),
               ("nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)",
                "nn.Conv2d(3, widths[0], 1, 1, 0, bias=False)")),
    )},
)
