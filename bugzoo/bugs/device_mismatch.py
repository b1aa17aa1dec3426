"""device_mismatch: the batch stays on the CPU while the model is on the GPU."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, SymptomCheck, from_onset, patch_method
from bugzoo.data import Batch


def batch_left_on_cpu(self, batch: Batch) -> Batch:
    return batch  # The mistake: the .to(device) call is missing.


class DeviceMismatch(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "to_device", batch_left_on_cpu,
                     active=from_onset(trainer))


BUG = DeviceMismatch(
    id="device_mismatch",
    title="CPU batch fed to a CUDA model",
    category="loop",
    taxonomy={
        "H.gpu.missing_transfer": "literal",
    },
    symptom=("the first forward pass raises 'Expected all tensors to be on the same device'"),
    check=SymptomCheck("crashed", "event"),
    explanation=("model.to('cuda') moves the parameters, not the data. A batch left on the CPU "
                 "reaches a CUDA module and PyTorch refuses to mix devices in one operation. "
                 "Loud, but common when code written on a CPU laptop first runs on a GPU."),
    buggy="""\
model = model.to("cuda")
for x, y in loader:
    loss = loss_fn(model(x), y)""",
    fixed="""\
model = model.to("cuda")
for x, y in loader:
    x, y = x.to("cuda"), y.to("cuda")
    loss = loss_fn(model(x), y)""",
    loud=True,
    requires=("cuda",),
)
