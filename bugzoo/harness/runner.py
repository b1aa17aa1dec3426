"""Execute one run: build, plant the bug, train while detectors watch, summarise, store."""

from __future__ import annotations

import logging
import time
import traceback

import pandas as pd
import torch
from omegaconf import DictConfig

from bugzoo.bugs import Bug, get_bug, list_bugs
from bugzoo.config import resolved
from bugzoo.data.language import Source
from bugzoo.detector import Detector
from bugzoo.harness import distributed, store
from bugzoo.harness.budget import budget_scope
from bugzoo.harness.record import PartialRun, RunResult, build_summary
from bugzoo.harness.setup_digest import setup_digest
from bugzoo.harness.twin import twin_for
from bugzoo.harness.watch import call_all, observer, run_facts, run_view, watches_for
from bugzoo.telemetry import trace_tables
from bugzoo.train import Trainer, clean_targets, measure, measure_padding, serving_widths

log = logging.getLogger(__name__)


def execute(cfg: DictConfig, detectors: list[Detector] = (), bug: Bug | None = None,
            partial: PartialRun | None = None, armed: bool = True,
            honeypot: bool = False) -> RunResult:
    """Train one run with ``detectors`` watching; a crash is recorded, not raised.

    ``bug`` plants a Bug object directly instead of looking ``cfg.bug.id`` up (the conformance
    suite plants decoys this way). ``partial`` receives the trace rows and the watches as the
    run makes them. ``armed=False`` makes the run the buggy run's matched control, its
    disarmed twin (:class:`~bugzoo.train.Trainer`). ``honeypot`` marks a run whose ``bug`` is a
    decoy (:mod:`.honeypot`). Runs on several ranks go to :mod:`.distributed`."""
    list_bugs()  # every bug module loaded: sys.modules must not single out the planted one
    if bug is None and cfg.get("bug"):
        bug = get_bug(cfg.bug.id)
    if distributed.is_distributed(cfg, bug):
        return distributed.execute_distributed(cfg, detectors, bug, armed)
    torch.set_num_threads(int(cfg.harness.threads))
    partial = partial or PartialRun()
    watches = partial.watches = watches_for(list(detectors), cfg)
    trainer = Trainer(cfg, bug, armed=armed)
    start = time.perf_counter()
    rows = partial.rows
    outcome, error, startup_s, setup = "completed", None, None, None
    with budget_scope():  # the detectors' calls, each under its time budget
        try:
            trainer.build()  # first, so the twin finds the data loaded and is charged only its own work
            startup_s = time.perf_counter() - start
            twin = twin_for(watches, cfg, bug, armed)
            view = run_view(trainer, twin)
            setup = setup_digest(view)  # before any detector touches the run
            call_all(watches, "setup", view)
            trainer.fit([observer(watches)], rows=rows)
        except Exception as e:
            outcome, error = "crashed", f"{type(e).__name__}: {e}"
            if log.isEnabledFor(logging.INFO):  # formatting allocates: only when shown (under
                # a memory cap it fails, and its SystemError would replace the MemoryError)
                log.info("run crashed: %s\n%s", error, traceback.format_exc(limit=3))
        finally:
            call_all(watches, "teardown")
    wall_s = time.perf_counter() - start
    trace, layers = trace_tables(rows)
    completed = outcome == "completed"
    holdout = (measure(trainer.model, trainer.data.holdout, trainer.device,
                       targets_of=clean_targets(trainer.data)) if completed else None)
    padding = serving_check(trainer) if completed else None
    generation = generation_check(trainer) if completed and trainer.data.next_token else None
    summary = build_summary(
        cfg, bug, armed=armed, trace=trace, outcome=outcome, error=error, wall_s=wall_s,
        startup_s=startup_s, setup_digest=setup,
        detectors={w.detector.name: w.status(wall_s) for w in watches}, **run_facts(trainer),
        holdout=holdout, padding=padding, generation=generation,
        entropy_floor=entropy_floor(trainer), device=str(trainer.device), honeypot=honeypot)
    alarms = pd.DataFrame([a for w in watches for a in w.alarms], columns=store.ALARM_COLUMNS)
    return RunResult(resolved(cfg), trace, alarms, summary, layers, trainer=trainer)


def serving_check(trainer: Trainer) -> list[dict] | None:
    """The validation reviews measured as trained and padded as serving pads them, for data that
    declares a serving width (``serve_pad_to``); None otherwise."""
    width = trainer.data.serve_pad_to
    if not width:
        return None
    return measure_padding(trainer.model, trainer.data.val, serving_widths(width), trainer.device)


def entropy_floor(trainer: Trainer) -> float | None:
    """For next-token data from a known source, the source's entropy over the validation
    tokens; None otherwise (or when the run did not get as far as loading its data)."""
    data = getattr(trainer, "data", None)
    return data.info["entropy"]["val"] if data is not None and data.next_token else None


GENERATION_PROMPTS = 200  # validation sentences whose openings the generation check continues


def generation_check(trainer: Trainer) -> dict | None:
    """The trained language model used as it is served: the openings of validation sentences
    (``<bos>``, the subject and any number of words short of the end), left-padded into one
    batch as a decoder-only model is served, continued by
    :meth:`~bugzoo.train.Trainer.generate`, and what it wrote judged against the known source
    (:meth:`~bugzoo.data.language.Source.judge`), with the sentences' mean length; None for a
    model whose scores are not finite."""
    data, pad_id = trainer.data, trainer.data.pad_id
    n = min(GENERATION_PROMPTS, len(data.val))
    sampler = torch.Generator().manual_seed(trainer.seed)
    # each sentence cut at a random point after its subject and before its <eos>
    cut = torch.rand(n, generator=sampler)
    prompt_lengths = 2 + (cut * (data.val.lengths[:n] - 2)).long()
    width = int(prompt_lengths.max())
    prompts = torch.full((n, width), pad_id, dtype=torch.long)
    for row, length in enumerate(prompt_lengths.tolist()):
        prompts[row, width - length:] = data.val.x[row, :length]
    try:
        written, lengths = trainer.generate(prompts, data.info["max_len"], sampler)
    except FloatingPointError as e:  # a diverged model writes nothing to judge
        log.info("no generation check: %s", e)
        return None
    # each row's sentence starts after its left padding and holds ``lengths`` tokens
    sentences = torch.full((n, int(lengths.max())), pad_id, dtype=torch.long)
    for row, (start, length) in enumerate(zip((width - prompt_lengths).tolist(),
                                              lengths.tolist(), strict=True)):
        sentences[row, :length] = written[row, start:start + length].cpu()
    judged = Source(**data.info["source"]).judge(sentences, lengths, prompt_lengths[:, None])
    return {**judged, "mean_length": float(lengths.float().mean())}


def execute_and_store(cfg: DictConfig, root, sweep: str, detectors: list[Detector] = (),
                      armed: bool = True) -> tuple[RunResult, str]:
    """Execute one run and store it in ``<root>/<sweep>/<scenario>/seed<k>/`` (a disarmed
    twin as ``seed<k>.control/``)."""
    result = execute(cfg, detectors, armed=armed)
    path = store.run_dir(root, sweep, result.summary["scenario"], int(cfg.seed))
    if not armed:
        path = path.with_name(f"{path.name}.{store.CONTROL_TAG}")
    store.write_run(path, result.config, result.trace, result.alarms, result.summary,
                    result.layers)
    return result, str(path)
