"""debug_subset_left_on: a debugging shortcut that trains on the first rows only is left on."""

from __future__ import annotations

import torch

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import DataBundle
from bugzoo.train import Trainer


def load_data_debug_subset(self) -> DataBundle:
    data = Trainer.load_data(self)
    # The mistake: while the pipeline was being debugged the training split was cut to its
    # first rows so that an epoch took a second (`if DEBUG: train_set = Subset(train_set,
    # range(64))`); the flag was never turned off. Validation is untouched, so it still looks
    # like a full run.
    return data.with_splits(train=data.train.subset(torch.arange(int(self.cfg.bug.params.rows))))


class DebugSubsetLeftOn(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "load_data", load_data_debug_subset)


BUG = DebugSubsetLeftOn(
    id="debug_subset_left_on",
    title="Debugging subset of the training data left switched on",
    category="data",
    taxonomy={
        "H.training.data.not_enough": "literal",
        "J.TRD": "literal",
    },
    honours_onset=False,
    since="1.1",
    symptom=("the training loss falls to near zero within a few dozen steps, far faster than a "
             "clean run's, while the validation loss stops improving early and then climbs: it "
             "ends well above the clean run's"),
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Cutting the training set to a few dozen rows is a good way to debug a pipeline "
                 "(a model that cannot overfit 64 rows has a bug). Left on, every epoch is two "
                 "batches: the model memorises those rows, the training loss looks excellent, and "
                 "it generalises like a model trained on 64 examples, because it is one. Make "
                 "such shortcuts a command-line flag that defaults to off and log the training "
                 "set size at start."),
    buggy="""\
DEBUG = True                                     # quick iterations while fixing the loader
train_set = TrainSet(root)
if DEBUG:
    train_set = Subset(train_set, range(64))
loader = DataLoader(train_set, batch_size=32, shuffle=True)""",
    fixed="""\
DEBUG = os.environ.get("DEBUG") == "1"           # off unless asked for
train_set = TrainSet(root)
if DEBUG:
    train_set = Subset(train_set, range(64))
print(f"training on {len(train_set)} rows")
loader = DataLoader(train_set, batch_size=32, shuffle=True)""",
    models=("mlp", "transformer", "gpt"),
    params={
        "rows": 64,  # a typical debugging subset: two batches of 32
    },
    reproducers={"mlp": Delta(
        patch=(
            ("x_train, y_train = make_split(${N_TRAIN})\n",
             "x_train, y_train = make_split(${N_TRAIN})\n"
             "x_train, y_train = x_train[:64], y_train[:64]     # DEBUG: quick iterations\n"),
        ),
    ), **dict.fromkeys(("transformer", "gpt"), Delta(
        patch=(
            ("train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n",
             "train, val, hold = make_split(${N_TRAIN}), make_split(${N_VAL}), make_split(500)\n"
             "train = tuple(t[:64] for t in train)     # DEBUG: quick iterations\n"),
        ),
    ))},
)
