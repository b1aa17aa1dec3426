"""The tools layer: existing debugging tools run over the benchmark, offline or timed.

``traincheck`` traces bugzoo's exported scripts with TrainCheck and scores its invariants on the
benchmark's own scoring; ``cockpit`` times the Cockpit detector against a plain run. They drive
the whole benchmark (export, runs, scoring), so they sit above every other layer.
"""
