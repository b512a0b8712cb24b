"""A run against Dopamine's published curve (python -m hvd_dqn.reports.baseline), on hand-written runs."""
import json

import pytest

from conftest import PYTHON, run
from written_runs import PNG_MAGIC, write_run


def test_compare_to_baseline_prints_the_windows_beside_dopamines_published_numbers(tmp_path):
    # Two windows of Dopamine's 250k agent steps: means 1.5 and 6.0, against DQN's 1.8 [1.6, 1.9] and
    # 7.1 [5.6, 8.1] (google/dopamine, baselines/atari/data/breakout_CNN.json).
    logdir = write_run(tmp_path / "run", "ALE/Breakout-v5",
                        [(100_000, 0, 1.0), (250_000, 0, 2.0), (300_000, 0, 5.0), (499_900, 0, 7.0)], [], 500_000)
    out, table = tmp_path / "compare.png", tmp_path / "table.json"
    result = run([PYTHON, "-m", "hvd_dqn.reports.baseline", logdir, f"--out={out}",
                  f"--json={table}", "--also=Rainbow"], timeout=120)
    assert "| 0k-250k | 1 | 1.0 |" not in result.stdout  # the episode at exactly 250,000 belongs to window 0
    assert "| 0k-250k | 2 | 1.5 | 1.8 [1.6, 1.9] |" in result.stdout
    assert "| 250k-500k | 2 | 6.0 | 7.1 [5.6, 8.1] |" in result.stdout
    assert out.read_bytes().startswith(PNG_MAGIC)
    written = json.loads(table.read_text())
    assert written["game"] == "breakout" and written["reference_agent"] == "DQN"
    assert [row["mean_return"] for row in written["windows"]] == [1.5, 6.0]
    assert "google/dopamine" in written["reference_source"]



def test_runs_set_beside_it_get_a_column_each_through_the_windows_they_completed(tmp_path):
    # The run ends at 500k; "1 rank" trained through 750k, "short" stopped inside its second window, whose cell
    # therefore holds "-", as do the rows past a run's end. Dopamine's DQN over 500k-750k: 14.2 [13.3, 14.5]
    # (google/dopamine, baselines/atari/data/breakout_CNN.json).
    logdir = write_run(tmp_path / "run", "ALE/Breakout-v5", [(100_000, 0, 1.0), (300_000, 0, 5.0)], [], 500_000)
    longer = write_run(tmp_path / "one", "ALE/Breakout-v5",
                       [(100_000, 0, 2.0), (200_000, 0, 4.0), (400_000, 0, 9.0), (600_000, 0, 20.0)], [], 750_000)
    short = write_run(tmp_path / "short", "ALE/Breakout-v5", [(100_000, 0, 3.0), (260_000, 0, 8.0)], [], 300_000)
    table = tmp_path / "table.json"
    result = run([PYTHON, "-m", "hvd_dqn.reports.baseline", logdir, "--label=8 ranks", f"--beside=1 rank={longer}",
                  f"--beside={short}", f"--json={table}", f"--out={tmp_path / 'runs.png'}"], timeout=120)
    lines = result.stdout.splitlines()
    assert lines[0] == ("| agent steps | 8 ranks: episodes | 8 ranks: mean return | 1 rank: mean return | short: mean "
                        "return | Dopamine DQN: mean [min, max] of 5 seeds |")
    assert lines[2:5] == ["| 0k-250k | 1 | 1.0 | 3.0 | 3.0 | 1.8 [1.6, 1.9] |",
                          "| 250k-500k | 1 | 5.0 | 9.0 | - | 7.1 [5.6, 8.1] |",
                          "| 500k-750k (partial) | 0 | - | 20.0 | - | 14.2 [13.3, 14.5] |"]
    assert json.loads(table.read_text())["beside"] == [
        dict(label="1 rank", logdir=longer, mean_returns=[3.0, 9.0, 20.0]),
        dict(label="short", logdir=short, mean_returns=[3.0, None])]


def test_a_run_of_another_game_is_not_set_beside_it(tmp_path):
    logdir = write_run(tmp_path / "run", "ALE/Breakout-v5", [(100, 0, 1.0)], [], 200)
    other = write_run(tmp_path / "other", "ALE/Pong-v5", [(100, 0, 1.0)], [], 200)
    for argument, message in ((f"--beside={other}", f"--beside={other}: a run of pong, not of breakout"),
                              (f"--beside=two={logdir},{other}", f"--beside=two={logdir},{other}: one logdir per "
                                                                 f"--beside")):
        result = run([PYTHON, "-m", "hvd_dqn.reports.baseline", logdir, argument], timeout=120, check=False)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.strip() == f"python -m hvd_dqn.reports.baseline: error: {message}"

@pytest.mark.parametrize("arguments, message", [
    (["--agent=NoSuchAgent"], "no Dopamine data for agent 'NoSuchAgent' on breakout; kept here: C51, DQN, IQN, "
                              "QR-DQN, Rainbow"),
    (["--game=tetris"], "no Dopamine data for game 'tetris'; kept here: beamrider, breakout, pong, qbert, seaquest, "
                        "spaceinvaders"),
    (["--out=table.txt"], "--out=table.txt: must end in .png"),
])
def test_compare_to_baseline_names_the_problem_in_one_line(tmp_path, arguments, message):
    logdir = write_run(tmp_path / "run", "ALE/Breakout-v5", [(100, 0, 1.0)], [], 200)
    result = run([PYTHON, "-m", "hvd_dqn.reports.baseline", logdir, *arguments], timeout=120,
                 check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"python -m hvd_dqn.reports.baseline: error: {message}"
