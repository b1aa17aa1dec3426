"""Reference models. Every model is ``backbone`` followed by a linear ``head``.

A model is one module here holding its ``SPEC`` (:class:`ModelSpec`): the dataset it trains
on, its default settings and how to build it, which is also its Hydra config (``model=<name>``,
made by :mod:`bugzoo.config`). Another distribution may add a model under the entry-point group
``bugzoo.models``, its value a ``ModelSpec``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bugzoo.registry import Registry

if TYPE_CHECKING:
    from torch import nn

    from bugzoo.data import DataBundle


@dataclass(frozen=True)
class ModelSpec:
    """One reference model: ``build(data, **params)`` sizes it for ``data``; ``params`` are its
    defaults (``model.params``); ``run_cost_s`` is the rough wall time of one clean run on its
    defaults (``results/perf/baselines.md``), which a sweep uses only to start long runs
    first."""

    name: str
    dataset: str
    description: str
    build: Callable[..., nn.Module]
    params: Mapping[str, Any] = field(default_factory=dict)
    run_cost_s: float = 10.0


# The built-in models, simplest first: the one list of them (each is bugzoo/models/<name>.py).
BUILTIN = ("mlp", "lstm", "transformer", "resnet", "gpt")

MODELS = Registry("model", "bugzoo.models",
                  lambda: {name: f"{__name__}.{name}:SPEC" for name in BUILTIN})


def get_model(name: str) -> ModelSpec:
    """The model ``name``; an unknown name is a UsageError with a "did you mean"."""
    return MODELS.load(name)


def model_config(name: str) -> dict:
    """The ``model`` node a run composes (``model=<name>``), its dataset chosen with it."""
    spec = get_model(name)
    return {"defaults": [{"/data@_global_.data": spec.dataset}], "name": spec.name,
            "params": dict(spec.params)}


def build_model(name: str, data: DataBundle, **params) -> nn.Module:
    """Instantiate model ``name`` sized for ``data``; ``params`` are the model's own settings.

    The head starts small so that the initial loss is close to log(C), as a well-initialised
    classifier's should be.
    """
    import torch  # here: listing models and bugs must not pay for torch

    model = get_model(name).build(data, **params)
    if any(model.head.weight is p for p in model.backbone.parameters()):
        return model  # a head tied to the input embedding keeps the embedding's initialisation
    with torch.no_grad():
        model.head.weight.mul_(0.1)
        model.head.bias.zero_()
    return model
