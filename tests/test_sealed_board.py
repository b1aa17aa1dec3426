"""The sealed board: each cheat found against the 1.5 board (the armed flag read through frames
or threads, dispatch order read through a shared file, a clean oracle that trains the run
again) scores on the live board, inside the training process, and about 0 sealed, on a small
test split; and the confinement holds what it promises."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import faults
import pandas as pd
import pytest

from bugzoo.cli import main
from bugzoo.harness import sandbox, store
from bugzoo.harness.sweep import Split

SCENARIOS = ["mlp-missing_zero_grad", "mlp-double_softmax", "mlp-lr_too_high",
             "mlp-class_filtered_out", "mlp-clean"]
needs_namespaces = pytest.mark.skipif(sandbox.confinement() != sandbox.NAMESPACES,
                                      reason="no user namespaces on this machine")


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> pd.DataFrame:
    """``bugzoo bench --split test`` on a few mlp bugs at one fresh seed, with every cheat
    sealed and its live twin in the training process."""
    root = tmp_path_factory.mktemp("sealed-board")
    site = faults.install(root / "site")
    out = root / "sweep"
    out.mkdir()
    store.write_split(out, Split.test(1).as_dict())  # one fresh seed, as a resumed sweep keeps
    names = [f"{cheat}{suffix}" for cheat in faults.CHEATS for suffix in ("", "_live")]
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        patch.setenv("PYTHONPATH", faults.env_with(site)["PYTHONPATH"])
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["bench", "--split", "test", "--scenarios", *SCENARIOS, "--workers", "1",
                         "--out", str(out), "--no-progress", "--no-overhead", "--detectors",
                         ",".join(names), "harness.steps=30", "harness.eval_interval=10"]) == 0
    (Path(tempfile.gettempdir()) / "bugzoo-order-book.json").unlink(missing_ok=True)
    table = pd.read_csv(out / "leaderboard.csv").set_index("detector")
    table.attrs["sweep"] = out
    return table


def about_zero(row: pd.Series) -> bool:
    return abs(row["score"]) <= 0.05 and row["score_lo"] <= 0 <= row["score_hi"]


@needs_namespaces
@pytest.mark.slow
@pytest.mark.parametrize("cheat", faults.CHEATS)
def test_a_cheat_scores_about_zero_sealed(board, cheat):
    sealed = board.loc[cheat]
    assert sealed["scored"] == "sealed (namespaces)" and about_zero(sealed)
    assert sealed["honeypot_score"] == 0 and pd.isna(sealed["flag"])


@pytest.mark.slow
@pytest.mark.parametrize("cheat", ["frame_reader", "thread_reader", "clean_oracle"])
def test_in_the_training_process_a_cheat_still_scores(board, cheat):
    """What the live board cannot close: code in the process finds the armed flag, or the
    configuration and seed to train the clean run again. Its rows say they are trusted."""
    live = board.loc[f"{cheat}_live"]
    assert live["scored"] == "in-process (trusted)" and live["score"] >= 0.75, live["score"]


@pytest.mark.slow
def test_the_run_view_reaches_a_plant_that_knows_it_is_armed(board):
    """In the process, a plant on the model (double_softmax's head) tells the patch reader
    which run is armed, on the bugs planted there; sealed there is no model (the test above).
    The decoys' plant sits on the loop, not the model, so the honeypot column misses it."""
    live = board.loc["patch_reader_live"]
    assert live["score"] > 0.2 and live["matched_false_alarm_rate"] == 0


@pytest.mark.slow
def test_the_live_board_hides_the_dispatch_order(board):
    """Runs of one cost start in an order drawn with secrets, each with a temporary folder of
    its own: a shared file no longer tells which of a pair came first (1.00 before both)."""
    assert about_zero(board.loc["order_reader_live"])


@pytest.mark.slow
def test_the_honeypot_column_flags_the_live_cheats_that_read_the_armed_flag(board):
    """Reading the armed flag shows on the decoy pairs; the clean oracle, which compares with
    a true clean run, does not (sealing is what stops it)."""
    for cheat in ("frame_reader", "thread_reader"):
        assert board.loc[f"{cheat}_live", "honeypot_score"] == 1.0
        assert "scores on honeypots" in board.loc[f"{cheat}_live", "flag"]
    assert board.loc["clean_oracle_live", "honeypot_score"] == 0.0


@pytest.mark.slow
def test_a_decoy_pair_is_one_run_twice(board):
    """The decoy's plant changes nothing: its armed and disarmed runs have one trace."""
    runs = pd.read_csv(board.attrs["sweep"] / "outcomes.csv")
    decoys = runs[runs["honeypot"]].drop_duplicates(["scenario", "seed", "run_role"])
    assert set(decoys["run_role"]) == {"buggy", "control"} and decoys["scenario"].str.endswith(
        ".honeypot").all()
    assert decoys["trace_digest"].nunique() == 1


def confined(code: str, hidden: list[Path], private: Path | None = None
             ) -> subprocess.CompletedProcess:
    """``code`` run as a sealed job runs: in new namespaces, the filesystem sealed with
    ``hidden`` covered, then (given ``private``) a private job with that temporary folder."""
    job = (f"sandbox.enter_private_job(Path({str(private)!r}), 60, 4 << 30)" if private
           else "")
    prelude = textwrap.dedent(f"""
        import os, socket, tempfile
        from pathlib import Path
        from bugzoo.harness import sandbox
        sandbox.seal_filesystem([Path(p) for p in {[str(p) for p in hidden]!r}])
        {job}
    """)
    return subprocess.run(sandbox.confined_command([sys.executable, "-c",
                                                    prelude + textwrap.dedent(code)]),
                          capture_output=True, text=True, timeout=120)


@needs_namespaces
def test_a_sealed_job_cannot_write_read_hidden_files_or_reach_the_network(tmp_path):
    secret, private, outside = tmp_path / "sweep", tmp_path / "tmp", tmp_path / "written"
    secret.mkdir()
    private.mkdir()
    (secret / "split.json").write_text('{"seeds": [1]}')
    result = confined(f"""
        assert os.listdir({str(secret)!r}) == [], "the hidden folder shows"
        for target in ({str(outside)!r}, os.path.expanduser("~/bugzoo-x"), "/tmp/bugzoo-x"):
            try:
                open(target, "w")
                raise SystemExit(f"wrote {{target}}")
            except OSError:
                pass
        with open(os.path.join(tempfile.gettempdir(), "mine"), "w") as f:
            f.write("a private folder")
        try:
            socket.create_connection(("127.0.0.1", 22), timeout=1)
            raise SystemExit("reached the network")
        except OSError:
            pass
        print("sealed")
    """, [secret], private)
    assert result.stdout.strip() == "sealed", result.stderr
    assert not outside.exists() and not os.listdir(private)  # its private folder went with it


@needs_namespaces
def test_folders_hidden_inside_hidden_folders_are_sealed_too(tmp_path):
    """The scored sweep usually lies inside results/runs, which is hidden as well."""
    runs, private = tmp_path / "runs", tmp_path / "tmp"
    (runs / "lite").mkdir(parents=True)
    private.mkdir()
    (runs / "lite" / "split.json").write_text("{}")
    result = confined(f"print(os.listdir({str(runs)!r}))", [runs / "lite", runs])
    assert result.stdout.strip() == "[]", result.stderr
