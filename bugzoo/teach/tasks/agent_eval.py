"""The agent track: a bugzoo task set as an `Inspect AI <https://inspect.aisi.org.uk/>`_ task.

Each task folder of a set (``bugzoo task set --out DIR``) becomes one sample, given alone. Its
files are copied into the sample's sandbox, where an agent with bash and python tools works on
them and calls ``submit()`` when done. The scorer reads the agent's ``train.py`` and
``answer.json`` back out of the sandbox as text and grades them as ``bugzoo task grade`` does
(:mod:`bugzoo.teach.tasks.grade`): sealed, so the agent's code runs on this machine only inside
the grader's confinement, never with the scorer's rights. A sample scores 1 when the task is
solved, 0 otherwise; the grade's figures are in the score's metadata.

The default sandbox is ``docker``, from the recipe in ``agent_sandbox/`` beside this module:
one container per sample, with Python and bugzoo's CPU build of torch, none of bugzoo, no keys
and no network. The grading is not moved into that container on purpose: there, the agent
could have replaced torch or left a process running beside the grader. ``sandbox=local`` (a
temporary folder on this machine, where the agent can read anything the user can, the keys
included) is for trying the track out, and every score it gives says it is not credible.

Inspect AI is an optional dependency, the extra ``agents``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from bugzoo.errors import UsageError
from bugzoo.integrations.live import missing_extra

try:
    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import Score, Target, accuracy, scorer, stderr
    from inspect_ai.solver import TaskState, basic_agent, system_message
    from inspect_ai.tool import bash, python
    from inspect_ai.util import sandbox as current_sandbox
except ImportError as e:  # an optional extra: say which
    raise ImportError(missing_extra("inspect-ai", "agents")) from e

from bugzoo.teach.tasks.grade import Grade, grade
from bugzoo.teach.tasks.make import categories
from bugzoo.teach.tasks.script import family

TASK_FILES = ("train.py", "REPORT.md", "curves.png", "trace.csv")
RECIPE = Path(__file__).with_name("agent_sandbox") / "compose.yaml"  # the docker sandbox
NOT_CREDIBLE = ("NOT CREDIBLE: the local sandbox let the agent read the keys and bugzoo "
                "(use sandbox=docker)")
TOOL_TIMEOUT_S = 300  # a few training runs of a task script

INSTRUCTIONS = """\
You are debugging a PyTorch training script ({task}). The working folder holds train.py,
REPORT.md (what was observed, beside last month's working version of the script), curves.png
and trace.csv. Something in train.py makes training go wrong.

Fix train.py in place so that training is healthy again, and keep the task: the same data source
(the global `{source}`), no more optimizer steps than now, and the same kinds of layers. The
grader retrains your script over several seeds and tests the network it leaves in the global
`model` on fresh data; printed numbers do not count.

Then write answer.json in the working folder: {{"category": "<one of: {categories}>",
"explanation": "<one line>"}}. Call submit() with a one-line summary when you are done."""


def samples(set_dir: Path, only: list[str] | None = None) -> list[Sample]:
    """One sample per task folder of the set (all of them, or those named in ``only``)."""
    tasks, keys = set_dir / "tasks", set_dir / "keys"
    if not tasks.is_dir() or not keys.is_dir():
        raise UsageError(f"{set_dir} is not a task set (no tasks/ and keys/ in it; make one with "
                         "bugzoo task set --out DIR)")
    found = sorted(p.name for p in tasks.iterdir() if (p / "train.py").is_file())
    unknown = sorted(set(only or ()) - set(found))
    if unknown:
        raise UsageError(f"no task {', '.join(unknown)} in {set_dir} (tasks: {', '.join(found)})")
    return [Sample(id=name, input=INSTRUCTIONS.format(task=name,
                                                      source=source_global(keys / name),
                                                      categories=", ".join(categories())),
                   files={f: str(tasks / name / f) for f in TASK_FILES
                          if (tasks / name / f).is_file()},
                   metadata={"key": str((keys / name).resolve())})
            for name in found if not only or name in only]


def source_global(key: Path) -> str:
    """The name of the global that holds a task script's data source (its answer key says
    which model the task trains)."""
    return family(json.loads((key / "key.json").read_text())["scenario"]).SOURCE


@scorer(metrics=[accuracy(), stderr()])
def retrained(credible: bool):
    """1 when the grader judges the sandbox's train.py and answer.json a solution, else 0;
    each score from a sandbox that is not ``credible`` says so."""

    async def score(state: TaskState, target: Target) -> Score:
        result = await graded(state)
        if isinstance(result, Score):
            return result
        line = result.line() if credible else f"{NOT_CREDIBLE}. {result.line()}"
        return Score(value=1 if result.solved else 0, answer=result.category, explanation=line,
                     metadata={**asdict(result), "credible": credible})

    return score


async def graded(state: TaskState) -> Grade | Score:
    """The grade of the work in the sample's sandbox, or a score of 0 saying why there is none."""
    with tempfile.TemporaryDirectory(prefix="bugzoo-agent-") as folder:
        submission = Path(folder)
        try:
            script = await current_sandbox().read_file("train.py")
        except FileNotFoundError:
            return Score(value=0, explanation="no train.py in the working folder")
        (submission / "train.py").write_text(script)
        try:
            answer = await current_sandbox().read_file("answer.json")
        except FileNotFoundError:
            answer = json.dumps({"category": "none"})  # graded as a fix, diagnosed wrong
        (submission / "answer.json").write_text(answer)
        try:
            return await asyncio.to_thread(grade, submission, Path(state.metadata["key"]))
        except UsageError as error:
            return Score(value=0, explanation=str(error))


@task
def find_and_fix(set_dir: str = "results/runs/tasks", tasks: str = "", sandbox: str = "docker",
                 message_limit: int = 60) -> Task:
    """Debug each task of the set at ``set_dir`` (``tasks``: a comma-separated subset of its
    ids), each alone in a ``sandbox`` of Inspect's (``docker``: bugzoo's recipe, ``RECIPE``),
    scored by sealed retraining."""
    only = [t for t in tasks.split(",") if t] or None
    return Task(dataset=samples(Path(set_dir), only),
                solver=basic_agent(init=system_message("You fix broken training code."),
                                   tools=[bash(TOOL_TIMEOUT_S), python(TOOL_TIMEOUT_S)],
                                   message_limit=message_limit),
                scorer=retrained(credible=sandbox != "local"),
                sandbox=("docker", str(RECIPE)) if sandbox == "docker" else sandbox)
