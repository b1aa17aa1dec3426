"""worker_rng_copied: DataLoader workers each start from a copy of the training set's random
generator, never reseeded (TrainCheck's stackoverflow-67180955)."""

from __future__ import annotations

from bugzoo.bugs.base import Bug, SymptomCheck, patch_method


def no_worker_init_fn(self) -> None:
    # The mistake: DataLoader(train_set, ..., num_workers=2) with no worker_init_fn. Each
    # worker reads a copy of the dataset, generator and its state included; PyTorch reseeds
    # its own and NumPy's global generators per worker, but not the one the dataset holds.
    return None


class WorkerRngCopied(Bug):
    def before_build(self, trainer) -> None:
        patch_method(trainer, "worker_init_fn", no_worker_init_fn)


BUG = WorkerRngCopied(
    id="worker_rng_copied",
    title="Dataset generator copied into every DataLoader worker, never reseeded",
    category="data",
    taxonomy={
        "T.stackoverflow-67180955": "literal",
        "H.gpu.incorrect_state_sharing": "literal",
    },
    honours_onset=False,
    symptom=("no error and normal-looking curves, but the augmented training batches come in "
             "identical pairs (the same random transforms at the same positions) and the "
             "same sequence of 'random' transforms repeats every epoch; augmentation should "
             "regularise less, so validation loss may end higher"),
    # validation loss, the more sensitive sign of lost regularisation than accuracy on 300
    # validation examples
    check=SymptomCheck("final_val_loss", "higher"),
    explanation=("Each DataLoader worker process starts from a copy of the dataset object, "
                 "including any random generator it created in the main process. PyTorch "
                 "reseeds torch's, Python's and NumPy's global generators in every worker, but "
                 "not a generator the dataset holds: without a worker_init_fn that reseeds it, "
                 "every worker draws the same transforms, and with non-persistent workers every "
                 "epoch starts again from the same copied state. The augmentation's diversity "
                 "collapses to one epoch's worth of draws per worker."),
    buggy="""\
class Augmented(Dataset):
    def __init__(self, x, y, seed):
        self.x, self.y, self.rng = x, y, np.random.default_rng(seed)
    def __getitem__(self, i):
        return augment(self.x[i], self.rng), self.y[i]

loader = DataLoader(Augmented(x, y, seed), batch_size=32, shuffle=True, num_workers=2)""",
    fixed="""\
def worker_init_fn(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)   # a stream of its own

loader = DataLoader(Augmented(x, y, seed), batch_size=32, shuffle=True, num_workers=2,
                    worker_init_fn=worker_init_fn)""",
    models=("mlp", "resnet"),
    inapplicable={"gpt": ("a random augmentation's generator copied into loader workers: the "
                          "language has no augmentation drawing from one")},
    since="1.1",
)
