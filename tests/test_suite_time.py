"""tests/suite_time.py reads pytest's duration lines and outcome as pytest writes them."""

from __future__ import annotations

from suite_time import OUTCOME, Reference, page, per_file

OUTPUT = """\
============================= slowest durations ==============================
12.50s setup    tests/test_a.py::test_x@test_a:fixture
3.00s call     tests/test_a.py::test_x@test_a:fixture
0.24s call     tests/test_b.py::test_y[mlp-clean]
0.00s teardown tests/test_b.py::test_y[mlp-clean]
1.00s call     tests/test_a.py::test_z
1867 passed, 3 skipped, 1 xfailed, 11 warnings in 882.48s (0:14:42)
"""


def test_each_files_worker_seconds_and_tests_are_summed_from_the_duration_lines():
    files = per_file(OUTPUT).set_index("file")
    assert files.loc["tests/test_a.py"].tolist() == [16.5, 2]
    assert files.loc["tests/test_b.py"].tolist() == [0.2, 1]  # rounded to 0.1 s
    assert list(files.index) == ["tests/test_a.py", "tests/test_b.py"]  # costliest first
    [outcome] = [m[1] for line in OUTPUT.splitlines() if (m := OUTCOME.match(line))]
    assert outcome == "1867 passed, 3 skipped, 1 xfailed, 11 warnings"
    text = page(882.4, 1425.2, Reference(1.34, 1.52, 0.1), Reference(0.99, 2.9, 2.3), outcome,
                per_file(OUTPUT))
    assert "| wall time | 882 s (budget 480 s) |" in text and "| tests/test_a.py | 16.5 | 2 |" in text
    # a machine whose cores are shared shows in the wall time and the load, not the CPU time
    assert "| 1.34 / 0.99 CPU-s, 1.52 / 2.90 wall-s |" in text
    assert "| load average (1 min), before / after | 0.10 / 2.30 |" in text
