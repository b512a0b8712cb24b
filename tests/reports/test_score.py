"""reports.score --per: a run's returns, loss, Q and spread by windows of env steps, from its written files."""
import csv
import json
import os
import subprocess
import sys

from hvd_dqn.reports import score


def _write(folder):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"env_id": "CartPole-v1"}))
    with open(folder / "episodes.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "rank", "env", "return", "length", "wall_s"])
        for env_steps, episode_return in [(40, 10.0), (90, 20.0), (150, 60.0), (260, 100.0)]:
            writer.writerow([env_steps, env_steps, 0, 0, episode_return, 10, env_steps / 10])
    with open(folder / "metrics.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "td_loss", "q_mean", "return_std", "env_steps_per_second",
                         "eval_return_mean"])
        writer.writerows([[50, 50, "", "", "", 900, ""], [100, 100, 2.0, 0.5, 0.25, 100, 30.0],
                          [150, 150, 1.0, 1.5, 0.75, 80, ""], [200, 200, 3.0, 2.5, 1.0, 60, ""],
                          [300, 300, 0.5, 3.0, 2.0, 50, 120.0]])
    return str(folder)


def test_each_window_holds_its_episodes_and_what_was_logged_in_it(tmp_path):
    logdir = _write(tmp_path / "run")
    _, episodes = score.read_run(logdir, log_hint=False)
    rows = score.by_windows(episodes, score.read_metrics(logdir), per=100)
    assert [(row["start"], row["end"], row["episodes"], row["mean_return"]) for row in rows] == [
        (0, 100, 2, 15.0), (100, 200, 1, 60.0), (200, 300, 1, 100.0)]
    assert rows[0]["td_loss"] == [2.0] and rows[0]["eval_return_mean"] == [30.0]
    assert rows[0]["env_steps_per_second"] == [900, 100]
    assert rows[1]["td_loss"] == [1.0, 3.0] and rows[1]["return_std"] == [0.75, 1.0]
    table = score.window_table(rows).splitlines()
    assert table[2] == "| 0-100 | 2 | 15.0 | 2 to 2 | 0.5 to 0.5 | 0.25 | 30.0 | 500 |"
    assert table[3] == "| 100-200 | 1 | 60.0 | 1 to 3 | 1.5 to 2.5 | 0.875 | - | 70 |"


def test_a_run_without_the_spread_column_shows_a_dash(tmp_path, capsys):
    logdir = _write(tmp_path / "run")
    rows = open(f"{logdir}/metrics.csv").read().splitlines()
    with open(f"{logdir}/metrics.csv", "w") as handle:  # the columns DQN writes: no return_std
        handle.write("\n".join(",".join(cells for index, cells in enumerate(row.split(",")) if index != 4)
                               for row in rows) + "\n")
    assert score.main([logdir, "--per=300"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[-1] == "| 0-300 | 4 | 47.5 | 0.5 to 3 | 0.5 to 3 | - | 30.0, 120.0 | 80 |"


def test_a_window_that_is_not_positive_is_refused_in_one_line(tmp_path, capsys):
    logdir = _write(tmp_path / "run")
    assert score.main([logdir, "--per=0"]) == 2
    assert capsys.readouterr().err.strip() == ("python -m hvd_dqn.reports.score: error: --per=0: the window must be a "
                                              "positive number of env steps")


def test_a_reader_that_stops_early_ends_the_report_without_a_traceback(tmp_path):
    # As `python -m hvd_dqn.reports.score RUN --per=N | head` does: the pipe's reader is gone before the report
    # prints, so its first write fails with EPIPE.
    logdir = _write(tmp_path / "run")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "hvd_dqn.reports.score", logdir, "--per=100"],
                                stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (1, "")
