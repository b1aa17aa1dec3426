"""The judge layer: judging detectors and the benchmark itself.

``bench`` (``bugzoo bench``) sweeps and scores, ``scoring`` (``bugzoo score``) turns stored runs
into leaderboards, ``validity`` (``bugzoo results validate``) proves each bug manifests, ``conformance``
(``bugzoo check``) checks a detector plug-in, ``curves`` (``bugzoo curves``) draws symptom
curves, ``perf`` (``bugzoo results perf``) measures speed, ``overfit`` is the single-batch overfit
check, and ``tables`` writes Markdown tables.
"""
