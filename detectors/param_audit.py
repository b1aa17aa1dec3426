"""``param_audit``: parameters that cannot learn — no gradient, frozen, or not optimised."""

from __future__ import annotations

from bugzoo import Alarm, Detector, Observation, RunView


class ParamAudit(Detector):
    """Checklist: "frozen layers, detached graph, wrong optimizer setup" (reference notes).

    At every step, compares ``model.named_parameters()`` with the optimizer's param groups
    (a head may be replaced after the optimizer was built) and looks at ``.grad`` after the
    step: a trainable parameter the optimizer does not hold (``optim``), a trainable parameter
    with no gradient after backward (``model``: detached graph or unused layer), a parameter
    with ``requires_grad=False`` for more than ``frozen_share`` of the run's steps in a row
    (``optim``: a short head-only warm-up is a legitimate freeze, a freeze that never ends is
    not). Each kind alarms once.
    """

    scope = "targeted"  # checks for one known mistake

    def __init__(self, frozen_share: float = 0.25):
        self.frozen_share = frozen_share

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.reported: set[str] = set()
        self.frozen_for: dict[str, int] = {}
        self.frozen_limit = max(1, int(self.frozen_share * run.steps))

    def observe(self, obs: Observation) -> list[Alarm]:
        model, optimizer = self.run.model, self.run.optimizer
        optimised = {id(p) for g in optimizer.param_groups for p in g["params"]}
        named = list(model.named_parameters())
        self.frozen_for = {n: self.frozen_for.get(n, 0) + 1 for n, p in named
                           if not p.requires_grad}
        checks = {
            "param_not_in_optimizer": ("optim", [n for n, p in named
                                                 if p.requires_grad and id(p) not in optimised]),
            "frozen_param": ("optim", [n for n, k in self.frozen_for.items()
                                       if k > self.frozen_limit]),
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
