"""The clean training loop.

``Trainer`` builds a run's parts (data, model, optimizer, schedule, loss, loaders) and trains
it, recording one Observation per step. Each build step and each piece of the loop is a small
method, so a planted bug (``bugzoo.bugs``) can replace exactly one of them; ``fit`` reads top
to bottom.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace

import numpy as np
import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from bugzoo.bugs.base import Bug, Clock, plants_disarmed
from bugzoo.data import Batch, BatchLoader, DataBundle, Split, load_dataset
from bugzoo.data.augment import Augmentation, AugmentedSplit
from bugzoo.data.base import Normalization, f_scores, fit_normalization, reseed_dataset_generator
from bugzoo.models import build_model
from bugzoo.telemetry import Observation, Telemetry

Observer = Callable[[Observation], None]
IGNORE = -100  # a target the loss skips (CrossEntropyLoss's ignore_index)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) RNGs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def use_deterministic_kernels(on: bool) -> None:
    """Ask torch for deterministic kernels (``harness.deterministic``), or allow the fastest
    ones again. Process-wide, so every run sets it. cuBLAS is deterministic only with a fixed
    workspace, which it reads from ``CUBLAS_WORKSPACE_CONFIG`` when first used."""
    if on:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(on)


@contextmanager
def rng_states_kept() -> Iterator[None]:
    """Put the Python, NumPy and torch (CPU and CUDA) RNG states back as they were after the
    block, whatever it seeds or draws."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng():
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def loss_floor(label_smoothing: float, num_classes: int) -> float:
    """The lowest value the clean cross-entropy loss can take: the entropy of the smoothed
    target distribution under label smoothing ``eps`` (mass 1 - eps + eps/C on the label,
    eps/C elsewhere), else 0."""
    eps = float(label_smoothing or 0.0)
    if eps <= 0:
        return 0.0
    on, off = 1 - eps + eps / num_classes, eps / num_classes
    return -(on * math.log(on) + (num_classes - 1) * off * math.log(off))


def resolve_device(name: str) -> torch.device:
    """``auto`` picks CUDA when present, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def count_correct(logits: Tensor, y: Tensor) -> int:
    """How many rows of ``logits`` ([B, C], or [B, S, V] per token) put their highest score on
    their label ``y`` ([B], or [B, S]; an ``IGNORE`` label is never right)."""
    return (logits.argmax(-1) == y).sum().item()


def shift_labels(labels: Tensor) -> Tensor:
    """Next-token targets: position ``t`` is scored against token ``t + 1``; the last position
    has no next token."""
    return torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], IGNORE)], dim=1)


def mask_padding(targets: Tensor, pad_id: int) -> Tensor:
    """Padding is no target: a position whose next token is padding is skipped by the loss."""
    return targets.masked_fill(targets == pad_id, IGNORE)


def batch_labels(batch: Batch) -> Tensor:
    """A next-token batch's labels, trimmed to the width its tokens were trimmed to."""
    return batch.y[:, : batch.inputs[0].shape[1]]


def clean_targets(data: DataBundle) -> Callable[[Batch], Tensor]:
    """What the clean code scores a batch's logits against: its labels, or for next-token data
    each real token's next token."""
    if not data.next_token:
        return lambda batch: batch.y
    return lambda batch: mask_padding(shift_labels(batch_labels(batch)), data.pad_id)


def counted(targets: Tensor) -> int:
    """How many targets the loss scores (those not ``IGNORE``)."""
    return int((targets != IGNORE).sum())


@torch.no_grad()
def loss_and_accuracy(forward: Callable[[Batch], Tensor], batches: Iterable[Batch],
                      device: torch.device, autocast: Callable = nullcontext,
                      correct_in: Callable[[Tensor, Tensor], int] = count_correct,
                      targets_of: Callable[[Batch], Tensor] = lambda batch: batch.y
                      ) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``forward`` over every target of ``batches`` (each
    batch's from ``targets_of``; per token for next-token data), without gradients; each
    batch's correct predictions counted by ``correct_in(logits, targets)``."""
    total_loss, correct, count = 0.0, 0, 0
    for batch in batches:
        batch = batch.to(device)
        targets = targets_of(batch)
        with autocast():
            logits = forward(batch)
        total_loss += nn.functional.cross_entropy(logits.float().flatten(0, -2), targets.flatten(),
                                                  reduction="sum").item()
        correct += correct_in(logits, targets)
        count += counted(targets)
    return total_loss / count, correct / count


def measure(model: nn.Module, split, device: torch.device, batch_size: int = 500,
            targets_of: Callable[[Batch], Tensor] = lambda batch: batch.y
            ) -> tuple[float, float]:
    """Loss and accuracy of ``model`` on a split in eval mode (the clean code: how the harness
    measures the holdout split, whatever bug the run has; ``targets_of``: see
    :func:`clean_targets`)."""
    was_training = model.training
    model.eval()
    result = loss_and_accuracy(lambda batch: model(*batch.inputs),
                               BatchLoader(split, batch_size, shuffle=False), device,
                               targets_of=targets_of)
    model.train(was_training)
    return result


def serving_widths(serve_pad_to: int) -> list[int | None]:
    """The padding widths a serving check measures: as trained (``None``: each batch padded to
    its longest row), then powers of two from 64 up to the serving width."""
    widths: list[int | None] = [None]
    width = 64
    while width < serve_pad_to:
        widths.append(width)
        width *= 2
    return [*widths, serve_pad_to]


def measure_padding(model: nn.Module, split, widths: Iterable[int | None], device: torch.device,
                    batch_size: int = 100) -> list[dict]:
    """Loss and accuracy of ``model`` on the same rows padded to each width (``None``: to each
    batch's longest row): how a practitioner checks that serving-time padding changes nothing."""
    points = []
    for width in widths:
        loss, acc = measure(model, replace(split, pad_to=width), device, batch_size)
        points.append({"width": width, "loss": loss, "acc": acc})
    return points


def outlier_batch(batch: Batch, num_classes: int, scale: float = 1e3) -> Batch:
    """An extreme batch (a corrupted shard): its first example repeated, with a wrong label and
    float features in the wrong units (times ``scale``)."""
    n = len(batch.y)
    inputs = tuple(t[:1].expand(n, *t.shape[1:]) * (scale if t.is_floating_point() else 1)
                   for t in batch.inputs)
    return Batch(inputs, ((batch.y[:1] + 1) % num_classes).expand(n, *batch.y.shape[1:]).clone())


class Trainer:
    """One training run of one model on one dataset, optionally with a planted bug."""

    def __init__(self, cfg: DictConfig, bug: Bug | None = None, rank: int = 0,
                 world_size: int = 1, armed: bool = True):
        """``armed=False`` makes the run its bug's matched control: the plant is installed
        disarmed (:func:`~bugzoo.bugs.base.plants_disarmed`) when it is patches only, and not
        at all otherwise."""
        self.cfg = cfg
        self.bug = bug
        self.seed = int(cfg.seed)
        self.steps = int(cfg.harness.steps)
        self.onset = int(cfg.bug.onset) if bug is not None else self.steps
        self.clock = Clock(self.onset)  # what a planted bug's patches read the step from
        self.device = resolve_device(cfg.harness.device)
        self.rank, self.world_size = rank, world_size
        self.plants = bug is not None and (armed or bug.patches_only)
        self.armed = armed
        if self.plants:
            with plants_disarmed(not armed):
                bug.before_build(self)

    @property
    def step(self) -> int:
        """The optimizer step the loop is at (from 0)."""
        return self.clock.step

    @step.setter
    def step(self, value: int) -> None:
        self.clock.step = value

    # ----------------------------------------------------------------- building the run
    def build(self) -> Trainer:
        seed_everything(self.seed)
        use_deterministic_kernels(bool(self.cfg.harness.get("deterministic", False)))
        self.data = self.select_features(self.normalize(self.load_data()))
        self.model = self.build_model().to(self.device)
        self.optimizer = self.build_optimizer()
        self.scheduler = self.build_scheduler()
        self.loss_fn = self.build_loss()
        self.scaler = self.build_scaler()
        self.train_loader = self.build_train_loader()
        self.val_loader = self.build_val_loader()
        if self.plants:
            with plants_disarmed(not self.armed):
                self.bug.after_build(self)
        # what a restarted job builds before it resumes: the same parts, as they are now
        self.built_state = (copy.deepcopy(self.checkpoint())
                            if self.cfg.harness.get("restart_at") is not None else None)
        self.telemetry = Telemetry(self.model)
        return self

    def load_data(self) -> DataBundle:
        return load_dataset(self.cfg.data.name, seed=self.cfg.data.seed, **self.cfg.data.params)

    def fit_scaler(self, data: DataBundle) -> Normalization:
        """Mean and std of the training split only: validation and holdout stay unseen."""
        return fit_normalization(data.train.x, data.norm_dims)

    def normalize(self, data: DataBundle) -> DataBundle:
        """Standardise every split with the scaler fitted by :meth:`fit_scaler`."""
        if data.norm_dims is None:
            return data
        norm = self.fit_scaler(data)
        return data.with_splits(train=norm.apply(data.train), val=norm.apply(data.val),
                                holdout=norm.apply(data.holdout))

    def score_features(self, data: DataBundle) -> Tensor:
        """How well each feature separates the classes, on the training split only."""
        return f_scores(data.train.x, data.train.y, data.num_classes)

    def select_features(self, data: DataBundle) -> DataBundle:
        """Keep the ``data.select_k`` best-scoring features of every split (all without it)."""
        k = self.cfg.data.get("select_k")
        if not k:
            return data
        keep = self.score_features(data).topk(int(k)).indices.sort().values
        return data.with_splits(**{name: replace(split, x=split.x[:, keep]) for name, split in
                                   (("train", data.train), ("val", data.val),
                                    ("holdout", data.holdout))})

    def build_model(self) -> nn.Module:
        return build_model(self.cfg.model.name, self.data, **self.cfg.model.params)

    def build_optimizer(self) -> torch.optim.Optimizer:
        """AdamW (``optim: adamw``, the default) or SGD with momentum (``optim: sgd``)."""
        o = self.cfg.optim
        if o.name == "sgd":
            return torch.optim.SGD(self.model.parameters(), lr=o.lr, momentum=o.momentum,
                                   weight_decay=o.weight_decay)
        return torch.optim.AdamW(self.model.parameters(), lr=o.lr, betas=tuple(o.betas),
                                 eps=o.eps, weight_decay=o.weight_decay)

    def build_scheduler(self) -> torch.optim.lr_scheduler.LRScheduler | None:
        """Linear warm-up then cosine decay (``schedule: cosine``) or nothing (``constant``)."""
        o = self.cfg.optim
        if o.schedule == "constant":
            return None
        warmup, total = int(o.warmup_steps), self.steps

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            progress = (step - warmup) / max(1, total - warmup)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    def build_loss(self) -> nn.Module:
        return nn.CrossEntropyLoss(label_smoothing=float(self.cfg.loss.label_smoothing))

    def build_scaler(self) -> torch.amp.GradScaler | None:
        if self.cfg.harness.precision == "fp16" and self.cfg.optim.grad_scaler:
            return torch.amp.GradScaler(self.device.type)
        return None

    def training_set(self) -> Split:
        """The training split as the loader reads it: through the random augmentation
        ``data.augment`` sets (none by default), drawn from a generator the set holds."""
        augment = self.cfg.data.get("augment")
        if not augment:
            return self.data.train
        # its own stream, apart from the loader's shuffling (seeded with the run's seed)
        return AugmentedSplit.of(self.data.train, Augmentation(**augment), seed=self.seed + 1)

    def worker_init_fn(self) -> Callable[..., None] | None:
        """What each of the training loader's workers runs as it starts: it reseeds its copy of
        the training set's generator from its own seed."""
        return reseed_dataset_generator

    def build_train_loader(self) -> BatchLoader:
        """Shuffled batches of the training set, reshuffled every epoch from the run's seed;
        read by ``harness.num_workers`` worker processes (none by default)."""
        return BatchLoader(self.training_set(), self.cfg.harness.batch_size, shuffle=True,
                           seed=self.seed, drop_last=True,
                           num_workers=int(self.cfg.harness.get("num_workers") or 0),
                           worker_init_fn=self.worker_init_fn())

    def build_val_loader(self) -> BatchLoader:
        return BatchLoader(self.data.val, self.cfg.harness.eval_batch_size, shuffle=False)

    # ----------------------------------------------------------------- pieces of one step
    def autocast(self):
        precision = self.cfg.harness.precision
        if precision == "fp32":
            return nullcontext()
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        return torch.autocast(self.device.type, dtype=dtype)

    def to_device(self, batch: Batch) -> Batch:
        return batch.to(self.device)

    def next_batch(self) -> Batch:
        t0 = time.perf_counter()
        batch = self.to_device(next(self.batches))
        if self.step == self.cfg.harness.outlier_step:
            batch = outlier_batch(batch, self.data.num_classes)
        self.data_s += time.perf_counter() - t0
        return batch

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def forward(self, batch: Batch) -> Tensor:
        return self.model(*batch.inputs)

    def targets(self, batch: Batch) -> Tensor:
        """What the loss scores the logits against: the labels; for next-token data, each
        position's next token (:meth:`shift_labels`) with padding masked out
        (:meth:`mask_padding`)."""
        if not self.data.next_token:
            return batch.y
        return self.mask_padding(self.shift_labels(batch_labels(batch)))

    def shift_labels(self, labels: Tensor) -> Tensor:
        return shift_labels(labels)

    def mask_padding(self, targets: Tensor) -> Tensor:
        return mask_padding(targets, self.data.pad_id)

    def compute_loss(self, logits: Tensor, y: Tensor) -> Tensor:
        """The mean loss over the batch's targets (per token, flattened, for next-token data)."""
        return self.loss_fn(logits.flatten(0, -2), y.flatten())

    def loss_divisor(self, targets: Tensor, step_targets: Sequence[Tensor]) -> float:
        """What a micro-batch's mean loss is divided by, so that the step's loss is the mean over
        all of the step's targets: the number of micro-batches when each holds as many targets;
        for next-token data, whose micro-batches hold different numbers of real tokens, the
        step's target count over the micro-batch's."""
        if not self.data.next_token:
            return len(step_targets)
        return sum(counted(t) for t in step_targets) / counted(targets)

    def backward(self, loss: Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def unscale_gradients(self) -> None:
        if self.scaler:
            self.scaler.unscale_(self.optimizer)

    def clip_gradients(self) -> None:
        if self.cfg.optim.clip_norm:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.optim.clip_norm)

    def optimizer_step(self) -> None:
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()

    def scheduler_step(self) -> None:
        if self.scheduler is not None:
            self.scheduler.step()

    def train_step(self) -> Tensor:
        """Forward and backward over ``accumulate`` micro-batches; returns the mean loss."""
        self.zero_grad()
        batches = [self.next_batch() for _ in range(int(self.cfg.optim.accumulate))]
        targets = [self.targets(batch) for batch in batches]
        total = torch.zeros((), device=self.device)
        for batch, target in zip(batches, targets, strict=True):
            with self.autocast():
                loss = (self.compute_loss(self.forward(batch), target)
                        / self.loss_divisor(target, targets))
            self.backward(loss)
            total += loss.detach().float()
        return total

    def run_step(self) -> Tensor:
        """One optimizer step: forward and backward, then clip, step and schedule."""
        self.schedule_freezing()
        loss = self.train_step()
        self.unscale_gradients()
        self.telemetry.measure_gradients()
        self.clip_gradients()
        self.optimizer_step()
        self.scheduler_step()
        return loss

    def schedule_freezing(self) -> None:
        """Warm-up freeze: ``model.backbone`` is frozen for the first
        ``optim.freeze_backbone_steps`` steps (head only) and unfrozen at that step."""
        n = int(self.cfg.optim.get("freeze_backbone_steps") or 0)
        if n > 0 and self.step in (0, n):
            self.model.backbone.requires_grad_(self.step == n)

    def is_eval_step(self) -> bool:
        return (self.step + 1) % self.cfg.harness.eval_interval == 0 or self.step + 1 == self.steps

    def enter_eval(self) -> None:
        self.model.eval()

    def leave_eval(self) -> None:
        self.model.train()

    def evaluate(self) -> tuple[float, float]:
        """Validation loss and accuracy in eval mode, without gradients; then back to train."""
        self.enter_eval()
        result = loss_and_accuracy(self.forward, self.val_loader, self.device, self.autocast,
                                   self.count_correct, self.targets)
        self.leave_eval()
        return result

    @torch.no_grad()
    def generate(self, prompts: Tensor, max_tokens: int, generator: torch.Generator
                 ) -> tuple[Tensor, Tensor]:
        """Continue left-padded prompts ``[B, P]`` as a user of the trained model does: in eval
        mode, one token at a time, each sampled from the model's next-token distribution at the
        row's last position, until the row has written ``<eos>`` or holds ``max_tokens`` tokens;
        a finished row is padded on the right while the others go on. Returns the tokens and
        each row's length (its prompt's real tokens and every token it wrote); a model whose
        scores are not finite (a diverged run) cannot be sampled: FloatingPointError."""
        pad_id, eos_id = self.data.pad_id, self.data.info["eos_id"]
        self.enter_eval()
        tokens = prompts.to(self.device)
        lengths = (tokens != pad_id).sum(1)
        done = lengths >= max_tokens
        while not done.all():
            with self.autocast():
                logits = self.model(tokens)[:, -1].float()
            if not torch.isfinite(logits).all():
                raise FloatingPointError("the model's next-token scores are not finite")
            word = torch.multinomial(logits.softmax(-1).cpu(), 1, generator=generator)
            word = torch.where(done, pad_id, word.squeeze(1).to(self.device))
            tokens = torch.cat([tokens, word[:, None]], dim=1)
            lengths = lengths + (~done).long()
            done = done | (word == eos_id) | (lengths >= max_tokens)
        self.leave_eval()
        return tokens, lengths

    def count_correct(self, logits: Tensor, y: Tensor) -> int:
        """How many of a validation batch's predictions are right (the accuracy's numerator)."""
        return count_correct(logits, y)

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    # ----------------------------------------------------------------- early stopping
    def reset_early_stopping(self) -> None:
        """Before the first step no validation loss has been seen: any is an improvement."""
        self.best_val_loss, self.evals_without_gain = math.inf, 0

    def should_stop(self, val_loss: float | None) -> bool:
        """Early stopping (``harness.early_stop_patience``): stop once the validation loss has
        not improved on its best for that many evaluations in a row."""
        patience = self.cfg.harness.get("early_stop_patience")
        if not patience or val_loss is None:
            return False
        if val_loss < self.best_val_loss:
            self.best_val_loss, self.evals_without_gain = val_loss, 0
        else:
            self.evals_without_gain += 1
        return self.evals_without_gain >= patience

    # ----------------------------------------------------------------- checkpoints
    def checkpoint(self) -> dict:
        """What a job saves to resume from: the model, optimizer, schedule and loss scaler."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict() if self.scheduler else None,
                "scaler": self.scaler.state_dict() if self.scaler else None}

    def load_checkpoint(self, checkpoint: dict) -> None:
        self.model.load_state_dict(checkpoint["model"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(checkpoint["scheduler"])
        if self.scaler is not None:
            self.scaler.load_state_dict(checkpoint["scaler"])

    def resume(self, checkpoint: dict) -> None:
        """A restarted job loads its last checkpoint into the parts it has just built."""
        self.load_checkpoint(checkpoint)

    def restart(self) -> None:
        """The job is preempted and restarted (``harness.restart_at``): it saves a checkpoint,
        the new process builds its parts afresh (step-0 weights, an empty optimizer state, the
        schedule at its start) and resumes. A complete resume continues the run bitwise as if it
        had never stopped (the data order and RNG streams carry on, as a resumable sampler's
        would)."""
        saved = copy.deepcopy(self.checkpoint())
        self.load_checkpoint(copy.deepcopy(self.built_state))
        self.resume(saved)

    # ----------------------------------------------------------------- epochs
    def epochs(self) -> Iterator[Batch]:
        """The training loader's batches epoch after epoch (as ``forever`` cycles them), each
        epoch announced to :meth:`start_epoch` before its first batch is drawn."""
        for epoch in itertools.count():
            self.start_epoch(epoch)
            yield from self.train_loader

    def start_epoch(self, epoch: int) -> None:
        """Where a loop does its once-per-epoch work as the training loader starts epoch
        ``epoch`` (from 0); the clean loop has none."""

    # ----------------------------------------------------------------- the loop
    def fit(self, observers: Sequence[Observer] = (), rows: list[dict] | None = None,
            steps: int | None = None) -> list[dict]:
        """Train for ``steps`` optimizer steps (all of the run's by default); returns the rows
        (:meth:`Observation.row`, one per step; ``telemetry.trace_tables`` turns them into the
        stored tables).

        Rows are appended to ``rows`` as they are made, so a caller keeps the partial trace of
        a run that crashes.
        """
        self.model.train()
        self.batches = self.epochs()
        rows = [] if rows is None else rows
        self.reset_early_stopping()
        # ``harness.eval_at_start``: the untrained model's validation score, as a baseline; the
        # first row's validation columns hold it
        baseline = self.evaluate() if self.cfg.harness.get("eval_at_start") else (None, None)
        start = time.perf_counter()
        for step in range(self.steps if steps is None else steps):
            self.step = step
            if step and step == self.cfg.harness.get("restart_at"):
                self.restart()
            t0 = time.perf_counter()
            self.data_s = 0.0
            lr = self.lr()
            training = self.model.training
            loss = self.run_step()
            val_loss, val_acc = (self.evaluate() if self.is_eval_step()
                                 else baseline if step == 0 else (None, None))
            now = time.perf_counter()
            obs = self.telemetry.observe(
                self.step, loss, lr=lr, training=training, val_loss=val_loss, val_acc=val_acc,
                step_s=now - t0, data_s=self.data_s, elapsed_s=now - start,
                cuda_mb=self.cuda_mb(), scale=self.scaler.get_scale() if self.scaler else None)
            rows.append(obs.row())
            for observe in observers:
                observe(obs)
            if self.should_stop(val_loss):
                break
        return rows

    def cuda_mb(self) -> float:
        if self.device.type != "cuda":
            return 0.0
        return torch.cuda.memory_allocated(self.device) / 2**20
