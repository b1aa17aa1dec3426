"""batch_size_positional: the training loader's arguments are passed by position, in the wrong
order, so ``shuffle=True`` lands in ``batch_size`` (one example per step)."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, Delta, SymptomCheck, patch_method
from bugzoo.data import BatchLoader


def loader_with_swapped_arguments(self) -> BatchLoader:
    # The mistake: the loader is called as loader(train_set, True, 32), after the order of
    # another API (data, shuffle, batch_size). The signature is (data, batch_size, shuffle):
    # batch_size gets True, which is the integer 1, and shuffle gets 32, which is truthy.
    # Nothing fails: the rows are still shuffled, one at a time.
    return BatchLoader(self.training_set(), True, self.cfg.harness.batch_size, self.seed, True,
                       int(self.cfg.harness.get("num_workers") or 0), self.worker_init_fn())


class BatchSizePositional(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "build_train_loader", loader_with_swapped_arguments)


BUG = BatchSizePositional(
    id="batch_size_positional",
    title="Loader arguments passed by position in the wrong order: batch size 1",
    category="data",
    taxonomy={
        "H.training.hparams.suboptimal_batch_size": "literal",
        "J.HBS": "literal",
    },
    honours_onset=False,
    since="1.1",
    symptom=("the training loss is very noisy from step to step and the run sees a small "
             "fraction of the examples it should in its steps; validation accuracy ends below "
             "the clean run's"),
    check=SymptomCheck("final_val_acc", "lower"),
    explanation=("A hand-rolled minibatch helper with the signature (inputs, targets, batch_size, "
                 "shuffle) is called as (inputs, targets, True, 32). True lands in batch_size, "
                 "and since bool is a subclass of int that is a batch size of 1; 32 goes to "
                 "shuffle and is truthy, so the data is still shuffled and nothing looks wrong. "
                 "Every step then follows the gradient of one example: with a learning rate "
                 "set for batches of 32 the updates are very noisy, and the step budget covers "
                 "32 times fewer examples. (torch's DataLoader refuses a bool batch_size; slicing "
                 "code does not.) Pass loader settings by keyword."),
    buggy="""\
def minibatches(inputs, targets, batch_size, shuffle=False):
    order = torch.randperm(len(inputs)) if shuffle else torch.arange(len(inputs))
    for i in range(0, len(inputs) - batch_size + 1, batch_size):
        yield inputs[order[i:i + batch_size]], targets[order[i:i + batch_size]]

for xb, yb in minibatches(x_train, y_train, True, 32):    # (shuffle, batch_size)?
    ...""",
    fixed="""\
for xb, yb in minibatches(x_train, y_train, batch_size=32, shuffle=True):
    ...""",
    models=("mlp", "transformer", "gpt"),
    reproducers={"mlp": Delta(
        patch=(
            ("\n\nlosses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             "\n\ndef minibatches(inputs, targets, batch_size, shuffle=False):\n"
             "    order = torch.randperm(len(inputs)) if shuffle else torch.arange(len(inputs))\n"
             "    for i in range(0, len(inputs) - batch_size + 1, batch_size):\n"
             "        yield inputs[order[i:i + batch_size]], targets[order[i:i + batch_size]]\n"
             "\n\nlosses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"),
            ("    order = torch.randperm(len(x_train))\n"
             "    for i in range(0, len(order) - BATCH + 1, BATCH):\n"
             "        if step == STEPS:\n"
             "            break\n"
             "        xb, yb = x_train[order[i:i + BATCH]], y_train[order[i:i + BATCH]]\n",
             "    for xb, yb in minibatches(x_train, y_train, True, BATCH):  # (shuffle, batch)?\n"
             "        if step == STEPS:\n"
             "            break\n"),
        ),
    ), **dict.fromkeys(("transformer", "gpt"), Delta(
        patch=(
            ("\n"
             "\n"
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n",
             "\n"
             "\n"
             "def minibatches(split, batch_size, shuffle=False):\n"
             "    order = torch.randperm(len(split[-1])) if shuffle else torch.arange(len(split[-1]))\n"
             "    for i in range(0, len(order) - batch_size + 1, batch_size):\n"
             "        yield [t[order[i:i + batch_size]] for t in split]\n"
             "\n"
             "\n"
             "losses, grad_norms, modes, nonfinite, step = [], [], [], False, 0\n"),
            ("    order = torch.randperm(len(train[-1]))\n"
             "    for i in range(0, len(order) - BATCH + 1, BATCH):\n"
             "        if step == STEPS:\n"
             "            break\n"
             "        *inputs, yb = (t[order[i:i + BATCH]] for t in train)\n",
             "    for *inputs, yb in minibatches(train, True, BATCH):  # (shuffle, batch)?\n"
             "        if step == STEPS:\n"
             "            break\n"),
        ),
    ))},
)
