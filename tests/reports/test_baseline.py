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
