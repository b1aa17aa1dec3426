"""Reference models. Every model is ``backbone`` followed by a linear ``head``."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo.data import DataBundle
from bugzoo.models.lstm import LSTMClassifier
from bugzoo.models.mlp import MLP
from bugzoo.models.resnet import ResNet
from bugzoo.models.transformer import TransformerClassifier

# model id -> (dataset it trains on, one-line description)
MODELS: dict[str, tuple[str, str]] = {
    "mlp": ("tabular", "multilayer perceptron with dropout"),
    "lstm": ("reviews", "embedding -> LSTM -> linear sentiment classifier"),
    "transformer": ("reviews", "mini encoder, own attention with padding masks"),
    "resnet": ("images", "small residual network with BatchNorm"),
}


def build_model(name: str, data: DataBundle, **params) -> nn.Module:
    """Instantiate model ``name`` sized for ``data``; ``params`` are the model's own settings.

    The head starts small so that the initial loss is close to log(C), as a well-initialised
    classifier's should be.
    """
    if name == "mlp":
        model = MLP(data.train.x.shape[1], data.num_classes, **params)
    elif name == "lstm":
        model = LSTMClassifier(data.vocab_size, data.num_classes, data.pad_id, **params)
    elif name == "transformer":
        model = TransformerClassifier(data.vocab_size, data.num_classes, data.pad_id, **params)
    elif name == "resnet":
        model = ResNet(data.num_classes, data.train.x.shape[1], **params)
    else:
        raise KeyError(name)
    with torch.no_grad():
        model.head.weight.mul_(0.1)
        model.head.bias.zero_()
    return model
