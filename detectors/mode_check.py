"""``mode_check``: training in eval mode, or evaluating with dropout/BatchNorm in train mode."""

from __future__ import annotations

import torch
from torch import nn

from bugzoo import Alarm, Detector, Observation, RunView

MODE_LAYERS = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)


class ModeCheck(Detector):
    """Checklist: ``model.train()`` for training steps, ``model.eval()`` for evaluation.

    Training: ``obs.training`` false at a training step. Evaluation: a forward hook on every
    dropout and BatchNorm layer fires under ``torch.no_grad()`` (how the loop evaluates) while the
    layer is still in training mode — dropout noise in the metrics and BatchNorm statistics
    updated from validation data. Categories: ``eval`` for the evaluation mistake, ``loop`` for
    training steps left in eval mode (the loop never calls ``model.train()`` again).
    """

    scope = "targeted"  # checks for one known mistake

    def setup(self, run: RunView) -> None:
        super().setup(run)
        self.step, self.reported = 0, set()
        for name, module in run.model.named_modules():
            if isinstance(module, MODE_LAYERS):
                self.hook(module.register_forward_hook, self._make_check(name))

    def _make_check(self, name: str):
        def check(module: nn.Module, inputs, output) -> None:
            if module.training and not torch.is_grad_enabled() and "eval" not in self.reported:
                self.reported.add("eval")
                self.queue(self.alarm(self.step, "train_mode_in_eval", "eval",
                                      f"{type(module).__name__} '{name}' ran in training mode "
                                      "under no_grad (evaluation without model.eval())"))
        return check

    def observe(self, obs: Observation) -> list[Alarm]:
        self.step = obs.step + 1
        alarms = self.flush()
        if not obs.training and "train" not in self.reported:
            self.reported.add("train")
            alarms.append(self.alarm(obs.step, "eval_mode_in_training", "loop",
                                     "the model was in eval mode during a training step "
                                     "(model.train() not restored after evaluation?)"))
        return alarms
