"""The agent track end to end: Inspect AI runs two bugzoo tasks with its mock model, no network.
The scripted agent fixes one task in its sandbox and leaves the other as it was; the retraining
grader scores them 1 and 0. (Inspect AI is imported by the tests that use it, not at collection,
where every pytest worker would pay seconds for it.)"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, named

from bugzoo.errors import UsageError
from bugzoo.teach.tasks.make import make_task

TASKS = {"task-01": "mlp-double_softmax", "task-02": "mlp-batch_collapsed"}


@pytest.fixture(scope="module")
def task_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("set")
    for name, scenario in TASKS.items():
        make_task(scenario, root / "tasks" / name, root / "keys" / name)
    return root


def scripted_agent(fixes: dict[str, tuple[str, str]]):
    """A mock model's replies: on a task in ``fixes``, one python call that writes the fixed
    script and the answer, then submit; on any other task, submit at once. Each reply states
    its token usage, which the mock model would otherwise count with a tokenizer it downloads."""
    from inspect_ai.model import ModelOutput, ModelUsage

    def reply(messages, tools, tool_choice, config) -> ModelOutput:
        task = next(t for t in TASKS if t in messages[1].text)
        if task in fixes and not any(m.role == "tool" for m in messages):
            script, category = fixes[task]
            code = (f"open('train.py', 'w').write({script!r})\n"
                    f"open('answer.json', 'w').write({json.dumps({'category': category})!r})")
            output = ModelOutput.for_tool_call("mockllm/model", "python", {"code": code})
        else:
            output = ModelOutput.for_tool_call("mockllm/model", "submit", {"answer": "done"})
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    return reply


@pytest.mark.slow
def test_an_agent_that_fixes_a_task_scores_and_one_that_does_not_fails(task_set):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from bugzoo.teach.tasks.agent_eval import find_and_fix

    key = task_set / "keys" / "task-01"
    fix = ((key / "fixed.py").read_text(), json.loads((key / "key.json").read_text())["category"])
    model = get_model("mockllm/model", custom_outputs=scripted_agent({"task-01": fix}))
    [log] = inspect_eval(find_and_fix(set_dir=str(task_set), sandbox="local"), model=model,
                         display="none", log_dir=str(task_set / "logs"), max_samples=1)
    assert log.status == "success", log.error
    scores = {s.id: s.scores["retrained"] for s in log.samples}
    assert scores["task-01"].value == 1 and "SOLVED: diagnosis right" in (
        scores["task-01"].explanation)
    assert scores["task-02"].value == 0 and "NOT SOLVED" in scores["task-02"].explanation
    assert scores["task-01"].metadata["healthy"] and not scores["task-02"].metadata["healthy"]
    for score in scores.values():  # the local sandbox shows the agent the keys: said each time
        assert score.explanation.startswith("NOT CREDIBLE") and not score.metadata["credible"]


def test_the_default_sandbox_is_the_repository_s_container_without_bugzoo_or_network(task_set):
    import yaml

    from bugzoo.teach.tasks.agent_eval import RECIPE, find_and_fix

    task = find_and_fix(set_dir=str(task_set))
    assert (task.sandbox.type, task.sandbox.config) == ("docker", str(RECIPE))
    service = yaml.safe_load(RECIPE.read_text())["services"]["default"]
    assert service["network_mode"] == "none" and service["build"] == "."
    image = (RECIPE.parent / "Dockerfile").read_text()
    pinned = next(line for line in (ROOT / "constraints.txt").read_text().splitlines()
                  if line.startswith("torch=="))
    assert pinned in image and "/whl/cpu" in image  # the CPU build bugzoo pins, no CUDA
    assert "bugzoo" not in image.split("FROM", 1)[1].lower()


def test_the_samples_show_the_task_folder_and_name_no_bug(task_set):
    from bugzoo.teach.tasks.agent_eval import samples

    found = samples(task_set)
    assert [s.id for s in found] == list(TASKS)
    for sample, scenario in zip(found, TASKS.values(), strict=True):
        assert set(sample.files) == {"train.py", "REPORT.md", "curves.png", "trace.csv"}
        assert not named(sample.input, scenario.split("-", 1)[1])
        assert "keys" not in sample.input
    with pytest.raises(UsageError, match="no task task-99"):
        samples(task_set, ["task-99"])
    with pytest.raises(UsageError, match="is not a task set"):
        samples(task_set / "tasks")
