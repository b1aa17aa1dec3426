"""``cockpit``: the Cockpit debugging tool (Schneider, Dangel & Hennig, NeurIPS 2021) as a detector.

Optional: needs ``pip install -c constraints.txt 'bugzoo-bench[tools]'`` (``cockpit-for-pytorch``,
which brings BackPACK). The tool is imported only once a run starts (in :meth:`Cockpit.setup`).
"""

from __future__ import annotations

import copy
import importlib.util
import logging
import math
import statistics
import warnings

import torch
from torch import nn

from bugzoo import Alarm, Detector, Observation, RunView

log = logging.getLogger(__name__)

EXTRA_HINT = ("the cockpit detector needs Cockpit and BackPACK: "
              "pip install -c constraints.txt 'bugzoo-bench[tools]'")


def _unsupported(model: nn.Module, loss_fn: nn.Module) -> str | None:
    """Why BackPACK cannot give Cockpit per-sample gradients for this model and loss, or None."""
    from backpack.extensions import BatchGrad

    if not isinstance(loss_fn, nn.CrossEntropyLoss):
        return f"loss {type(loss_fn).__name__} is not CrossEntropyLoss"
    supported = tuple(getattr(BatchGrad(), "_BackpropExtension__module_extensions", {}))
    owners = {type(m).__name__ for m in model.modules()
              if any(p.requires_grad for p in m.parameters(recurse=False))
              and not isinstance(m, supported)}
    return f"BackPACK has no per-sample gradients for {sorted(owners)}" if owners else None


class Cockpit(Detector):
    """Cockpit's ``economy`` quantities on a BackPACK-extended *shadow* of the model, with
    thresholds turning its instruments into alarms.

    Cockpit records and plots, it never alarms; its paper reads the instruments by eye. The
    rules below follow those readings:

    * **Loss** non-finite -> ``numerics``.
    * **Alpha** (where on the 1-D parabola along the update the step lands: 0 = the minimum,
      > 1 = beyond the far side, i.e. the loss went *up*): the paper's "steps are too large"
      reading; median over ``window`` steps above ``alpha_max`` -> ``optim``.
    * **GradNorm** above ``explode`` x its median over the first ``window`` steps -> ``optim``
      (gradient explosion, or gradients accumulating across steps).
    * **UpdateSize** zero while GradNorm is not, over ``window`` steps -> ``optim`` (the
      optimizer does not move the parameters it has gradients for).
    * **Distance** from the initial point zero after ``window`` steps -> ``optim``.
    * **GradNorm** exactly zero for ``window`` steps -> ``model`` (no gradient reaches the
      parameters). GradHist1d, NormTest, InnerTest and OrthoTest are computed (they are part of
      ``economy``) but get no rule: their readings are relative to batch size and scale, and
      the paper gives no number to read them by.

    Invasiveness: BackPACK's ``extend`` adds hooks to every module and Cockpit needs its own
    backward pass inside ``with cockpit(...)``, which the training loop does not offer. The
    adapter therefore leaves the live model alone and works on a deep copy: at the first
    training forward of each step it copies the live parameters (before the update) and any
    gradient left over from earlier steps into the shadow and keeps the batch and targets;
    after the step it runs forward, cross-entropy and backward of that batch on the shadow
    under Cockpit (in a forked RNG, so the live run's random stream is untouched). The shadow
    sees the model's own code and the live trajectory, but not bugs planted in the loop around
    the model (its loss is a fresh ``CrossEntropyLoss``, its dropout masks differ). On a model
    BackPACK cannot handle (a layer without per-sample gradients, e.g. the transformer's
    LayerNorm, found before training; or a failing first backward, e.g. the LSTM's) or a loss
    other than cross-entropy the detector stands down with a logged reason. Cost: one extra forward and a per-sample backward per step.
    """

    stood_down: str | None = None  # why the adapter went passive in this run, if it did
    role = "tool"
    run_by_default = False  # 5-20x overhead: run it by name (--detectors cockpit)

    def __init__(self, window: int = 10, alpha_max: float = 1.0, explode: float = 10.0,
                 every: int = 1):
        self.window, self.alpha_max, self.explode, self.every = window, alpha_max, explode, every

    @staticmethod
    def available() -> str | None:
        """Why this detector cannot run here, or ``None`` when it can."""
        missing = [m for m in ("cockpit", "backpack") if importlib.util.find_spec(m) is None]
        return f"{', '.join(missing)} not installed ({EXTRA_HINT})" if missing else None

    def setup(self, run: RunView) -> None:
        super().setup(run)
        reason = self.available()
        if reason:
            raise ImportError(reason)
        with warnings.catch_warnings():  # cockpit imports the deprecated pkg_resources
            warnings.simplefilter("ignore")
            from backpack import extend
            from cockpit import Cockpit as Tool
            from cockpit.utils.configuration import configuration
        self.fired: set[str] = set()
        self.batch: tuple | None = None
        self.history: dict[str, list[float]] = {}
        self.read: dict[str, set[int]] = {}
        self.stood_down = _unsupported(run.model, run.loss_fn)
        self.active = self.stood_down is None
        if not self.active:
            log.warning("cockpit stands down: %s", self.stood_down)
            return
        self.shadow = extend(copy.deepcopy(run.model))
        self.loss_fn = extend(nn.CrossEntropyLoss())
        self.sample_loss = nn.CrossEntropyLoss(reduction="none")
        self.params = [p for p in self.shadow.parameters() if p.requires_grad]
        self.tool = Tool(self.params, quantities=configuration("economy"))
        self.hook(run.model.register_forward_pre_hook, self._capture_inputs)
        self.hook(run.loss_fn.register_forward_pre_hook, self._capture_targets)

    def _capture_inputs(self, module, inputs) -> None:
        if self.batch is not None or not torch.is_grad_enabled():
            return
        with torch.no_grad():
            for live, mine in zip(module.parameters(), self.shadow.parameters(), strict=True):
                mine.copy_(live)
                mine.grad = None if live.grad is None else live.grad.detach().clone()
        self.shadow.train(module.training)
        self.batch = (tuple(x.detach() for x in inputs), None)

    def _capture_targets(self, module, args) -> None:
        if self.batch is not None and self.batch[1] is None and torch.is_grad_enabled():
            self.batch = (self.batch[0], args[1].detach())

    def _track(self, step: int) -> dict[str, list[float]]:
        """One Cockpit step on the shadow; returns this step's scalar readings."""
        inputs, y = self.batch
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # BackPACK's notes about containers and input grads
            logits = self.shadow(*inputs)
            loss = self.loss_fn(logits, y)
            losses = self.sample_loss(logits.detach(), y)
            with self.tool(step, info={"batch_size": len(y), "individual_losses": losses,
                                       "loss": loss, "optimizer": self.run.optimizer}):
                loss.backward(create_graph=self.tool.create_graph(step))
        out: dict[str, list[float]] = {}
        for q in self.tool.quantities:  # Alpha and UpdateSize for step t arrive at step t + 1
            name = type(q).__name__
            read = self.read.setdefault(name, set())
            for key in sorted(set(q.output) - read):
                read.add(key)
                value = q.output[key]
                if isinstance(value, (list, tuple)):  # per-parameter readings -> global norm
                    value = math.sqrt(sum(float(v) ** 2 for v in value))
                if isinstance(value, (int, float)):
                    out.setdefault(name, []).append(float(value))
        return out

    def observe(self, obs: Observation) -> list[Alarm]:
        alarms = self.flush()
        if self.active and self.batch is not None and self.batch[1] is not None \
                and obs.step % self.every == 0:
            try:
                readings = self._track(obs.step)
            except Exception as e:  # BackPACK cannot backpropagate through this model
                if self.history:
                    raise
                self.stood_down, self.active = f"BackPACK failed: {type(e).__name__}: {e}", False
                log.warning("cockpit stands down: %s", self.stood_down)
                readings = {}
            for name, values in readings.items():
                self.history.setdefault(name, []).extend(values)
            alarms += self._rules(obs.step, obs.loss) if self.active else []
        self.batch = None
        return alarms

    def teardown(self) -> list[Alarm]:
        if getattr(self, "active", False) and not self.history:
            self.stood_down = "no batch reached the model and its loss module (loss computed " \
                "elsewhere), so the shadow had nothing to track"
            log.warning("cockpit stood down: %s", self.stood_down)
        return super().teardown()

    def _fire(self, step: int, symptom: str, category: str, message: str) -> list[Alarm]:
        if symptom in self.fired:
            return []
        self.fired.add(symptom)
        return [self.alarm(step, symptom, category, f"cockpit: {message}")]

    def _rules(self, step: int, loss: float) -> list[Alarm]:
        h, w, out = self.history, self.window, []
        if not math.isfinite(loss):
            out += self._fire(step, "cockpit_loss_nonfinite", "numerics", "loss is not finite")
        alphas = [a for a in h.get("Alpha", [])[-w:] if math.isfinite(a)]
        if len(alphas) == w and statistics.median(alphas) > self.alpha_max:
            out += self._fire(step, "cockpit_alpha_large", "optim",
                              f"median alpha {statistics.median(alphas):.2f} > {self.alpha_max} "
                              "over the last steps: updates overshoot the valley")
        norms = h.get("GradNorm", [])
        if len(norms) > w:
            base = statistics.median(norms[:w])
            if base > 0 and norms[-1] > self.explode * base:
                out += self._fire(step, "cockpit_grad_norm_growth", "optim",
                                  f"gradient norm {norms[-1]:.3g} is {norms[-1] / base:.0f}x "
                                  "its early median")
        sizes = h.get("UpdateSize", [])[-w:]
        if len(sizes) == w and max(sizes) == 0 and min(norms[-w:]) > 0:
            out += self._fire(step, "cockpit_no_update", "optim",
                              "parameters do not move although gradients are non-zero")
        dists = h.get("Distance", [])
        if len(dists) > w and max(dists) == 0:
            out += self._fire(step, "cockpit_distance_zero", "optim",
                              "parameters never left their initial point")
        if len(norms) >= w and max(norms[-w:]) == 0:
            out += self._fire(step, "cockpit_grad_zero", "model",
                              "gradient norm is exactly zero: no gradient reaches the parameters")
        return out
