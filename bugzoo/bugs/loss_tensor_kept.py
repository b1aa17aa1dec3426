"""loss_tensor_kept: the loss tensor itself is appended to a history list every step."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method


class LossTensorKept(Bug):
    def before_build(self, trainer) -> None:
        trainer.losses = []
        backward = trainer.backward

        def backward_and_log(self, loss) -> None:
            backward(loss)
            self.losses.append(loss)  # the mistake: keeps the tensor, not loss.item()

        patch_method(trainer, "backward", backward_and_log,
                     active=from_onset(trainer))


BUG = LossTensorKept(
    id="loss_tensor_kept",
    title="Loss tensors (with their graphs) kept in a list",
    category="memory",
    taxonomy={
        "H.training.process.memory_management": "literal",
        "J.MMR": "literal",
    },
    symptom=("memory grows linearly with the step count: every step's activations stay referenced "
             "through the stored loss tensors"),
    check=SymptomCheck("heap_growth_mb", "higher"),
    explanation=("Appending `loss` instead of `loss.item()` to a logging list keeps a tensor "
                 "with a grad_fn alive, and with it the whole autograd graph of that step. "
                 "backward() frees the buffers saved for the gradient, but the graph's nodes "
                 "and whatever tensors they still reference stay reachable from the list, so "
                 "memory climbs step after step until the process runs out. How fast depends "
                 "on the model (here: clear for mlp and transformer with large batches)."),
    buggy="""\
losses = []
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    ...
    losses.append(loss)           # keeps the graph alive""",
    fixed="""\
    losses.append(loss.item())    # a Python float""",
    models=("mlp", "transformer", "gpt"),
)
