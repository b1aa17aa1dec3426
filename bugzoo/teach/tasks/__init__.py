"""Find-and-fix tasks: a buggy script and what was observed, graded by retraining the fix.

* :mod:`~bugzoo.teach.tasks.script` turns an exported pair into the task's scripts: neutral
  header and comments, and a seed taken from the command line.
* :mod:`~bugzoo.teach.tasks.runner` trains a script in a process of its own and evaluates the
  model it leaves on inputs the script never sees.
* :mod:`~bugzoo.teach.tasks.health` is the stated test of "fixed": not worse than the key's
  fixed script beyond a margin.
* :mod:`~bugzoo.teach.tasks.make` writes a task folder and its answer key;
  :mod:`~bugzoo.teach.tasks.grade` grades a submission; :mod:`~bugzoo.teach.tasks.solvers`
  holds the reference solvers (the ``rules`` one with its table in
  :mod:`~bugzoo.teach.tasks.rules`); :mod:`~bugzoo.teach.tasks.taskset` makes the task set and
  scores the solvers in ``results/agents.md``; :mod:`~bugzoo.teach.tasks.harmless` checks the
  changes ``oracle_variant`` draws against each model's clean script.
* :mod:`~bugzoo.teach.tasks.interview` makes an interview pack. ``bugzoo task ACTION`` is the
  command line's table (:mod:`bugzoo.cli`).
"""
