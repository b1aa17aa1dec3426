"""The harness layer: running runs.

``runner`` trains one run in this process, ``distributed`` one run on several ranks, ``watch``
runs the detectors inside a run, each call under a time limit from ``budget``, ``twin`` trains
the second copy of a run some detectors compare with, ``record`` builds what a run leaves behind
(``summary.json``),
``store`` writes run folders atomically, ``pool`` schedules runs on worker processes, ``sweep``
plans and makes many runs, ``honeypot`` makes the decoy bugs of a sweep's decoy pairs,
``sandbox`` confines code bugzoo judges (Linux namespaces), and ``app`` is the Hydra
application behind ``bugzoo run``.
"""
