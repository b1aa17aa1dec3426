"""The bugzoo trace: everything a run shows a sealed detector, and nothing else.

A trace is the run's plain facts (:class:`RunFacts`, what a practitioner knows of their own
loop before it starts) followed by one record per optimizer step
(:class:`~bugzoo.telemetry.Observation`). It holds no configuration, seed, scenario id, role,
path or code object, so a detector that reads only the trace cannot tell a buggy run from its
control by anything but how the two trained. :data:`RECORD_FIELDS` is the schema, with units;
the detector guide's table is generated from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bugzoo.docblocks import with_block
from bugzoo.paths import ROOT

TRACE_VERSION = 2

# name -> (unit, meaning) of every field of a record, in the Observation's order
RECORD_FIELDS: dict[str, tuple[str, str]] = {
    "step": ("index", "the optimizer step, from 0"),
    "loss": ("loss units", "training loss of the step (mean over its micro-batches), float32"),
    "lr": ("1", "learning rate of the first parameter group when the step began"),
    "grad_norm": ("L2", "norm of every gradient after backward and unscaling, before clipping"),
    "param_norm": ("L2", "norm of all parameters after the step"),
    "update_norm": ("L2", "norm of what the step changed in the parameters"),
    "update_ratio": ("1", "update_norm / param_norm"),
    "nonfinite_loss": ("bool", "the loss is NaN or infinite"),
    "nonfinite_grads": ("count", "gradient elements that are NaN or infinite"),
    "zero_grad_frac": ("share", "gradient elements exactly 0"),
    "step_s": ("s", "wall time of the step, evaluation included when it ran"),
    "data_s": ("s", "of step_s, time spent fetching batches"),
    "elapsed_s": ("s", "time since training began, at the end of the step"),
    "rss_mb": ("MiB", "resident memory of the training process"),
    "heap_mb": ("MiB", "bytes allocated through malloc (glibc; elsewhere the RSS)"),
    "cuda_mb": ("MiB", "CUDA memory allocated (0 on CPU)"),
    "scale": ("1", "the GradScaler's loss scale; absent without one"),
    "training": ("bool", "model.training when the step began"),
    "val_loss": ("loss units", "validation loss; on evaluation steps only"),
    "val_acc": ("share", "validation accuracy; on evaluation steps only"),
    "layer_grad_norms": ("L2 per parameter", "gradient norm of each parameter by its name in "
                         "named_parameters(); parameters without a gradient left out"),
}


@dataclass(frozen=True)
class RunFacts:
    """What a sealed detector's ``setup`` receives: the run's plain facts.

    * ``model_name``: the model family (``"mlp"``, ``"gpt"``, ...); ``dataset``: its data;
    * ``num_classes``: classes (a language model's vocabulary), so the expected first loss of
      cross-entropy is ``log(num_classes)``;
    * ``steps``: optimizer steps the run will make;
    * ``loss_floor``: the lowest training loss attainable (0, or the smoothed targets' entropy
      under label smoothing);
    * ``device``: ``"cpu"`` or ``"cuda"``.
    """

    model_name: str
    dataset: str | None
    num_classes: int
    steps: int
    loss_floor: float
    device: str

    @classmethod
    def of(cls, summary: dict) -> RunFacts:
        """The facts of a stored run, from its summary."""
        return cls(model_name=str(summary["model"]), dataset=summary.get("dataset"),
                   num_classes=int(summary["num_classes"] or 2), steps=int(summary["steps"]),
                   loss_floor=float(summary.get("loss_floor") or 0.0),
                   device=str(summary.get("device") or "cpu").split(":")[0])

    def as_dict(self) -> dict:
        return asdict(self)


def fields_table() -> str:
    """The schema as the Markdown table of the detector guide, under its version."""
    lines = [f"Trace version {TRACE_VERSION}:", "", "| field | unit | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {unit} | {meaning} |"
              for name, (unit, meaning) in RECORD_FIELDS.items()]
    return "\n".join(lines)


GUIDE_BLOCK = "trace-fields"  # the detector guide's block that fields_table() writes


def main() -> int:
    """Write the schema table into the detector guide (``bugzoo results trace-fields``)."""
    guide = ROOT / "docs" / "pages" / "detectors.md"
    guide.write_text(with_block(guide.read_text(), GUIDE_BLOCK, fields_table()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
