"""``param_audit``: parameters that cannot learn — no gradient, frozen, or not optimised."""

from __future__ import annotations

from bugzoo.detector import Alarm, Detector, RunView
from bugzoo.telemetry import Observation


class ParamAudit(Detector):
    """Checklist: "frozen layers, detached graph, wrong optimizer setup" (reference notes).

    At every step, compares ``model.named_parameters()`` with the optimizer's param groups
    (a head may be replaced after the optimizer was built) and looks at ``.grad`` after the
    step: a trainable parameter the optimizer does not hold (``optim``), a parameter with
    ``requires_grad=False`` (``model``), a trainable parameter with no gradient after backward
    (``model``: detached graph or unused layer). Each kind alarms once.
    """

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.reported: set[str] = set()

    def observe(self, obs: Observation) -> list[Alarm]:
        model, optimizer = self.run.model, self.run.optimizer
        optimised = {id(p) for g in optimizer.param_groups for p in g["params"]}
        named = list(model.named_parameters())
        checks = {
            "param_not_in_optimizer": ("optim", [n for n, p in named
                                                 if p.requires_grad and id(p) not in optimised]),
            "frozen_param": ("model", [n for n, p in named if not p.requires_grad]),
            "param_without_grad": ("model", [n for n, p in named
                                             if p.requires_grad and p.grad is None]),
        }
        alarms = []
        for symptom, (category, names) in checks.items():
            if names and symptom not in self.reported:
                self.reported.add(symptom)
                alarms.append(self.alarm(obs.step, symptom, category,
                                         f"{len(names)} parameter(s): {', '.join(names[:4])}"))
        return alarms
