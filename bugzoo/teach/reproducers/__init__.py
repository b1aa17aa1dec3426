"""Standalone reproducer templates for ``bugzoo export``: one module per model family.

Each module defines ``TEMPLATE`` (the fixed script, with ``${NAME}`` settings) and ``DEFAULTS``
(those settings). Each bug's patch of a template is its :class:`~bugzoo.bugs.Delta`, kept in the
bug's own module. A module may also define ``HEALTHY`` (variant name -> ``Delta``): clean
scripts that differ from the fixed one by a deliberate, harmless change (another batch size,
optimizer, width), and ``PIPELINES`` (name -> replacements): data-pipeline steps the template
lacks, which a delta whose settings name a ``PIPELINE`` gets in both scripts, and which the
module's ``fresh_split`` draws the grader's data through.
"""
