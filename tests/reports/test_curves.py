"""Learning curves: the trailing means and bands, and hvd_dqn.reports.curves on hand-written logdirs."""
import json

import numpy as np
import pytest

from hvd_dqn.reports.curves import CurveError, load_run, make_curve, parse_curve_argument, trailing_mean

from conftest import PYTHON, run
from written_runs import PNG_MAGIC, write_run


def test_trailing_mean_averages_the_last_window_episodes_before_each_point():
    ends = np.array([30.0, 10.0, 20.0, 40.0])  # unsorted on purpose
    returns = np.array([3.0, 1.0, 2.0, 4.0])
    points = np.array([0.0, 10.0, 15.0, 30.0, 40.0, 50.0])
    np.testing.assert_allclose(trailing_mean(ends, returns, points, window=2),
                               [np.nan, 1.0, 1.0, 2.5, 3.5, 3.5])
    np.testing.assert_allclose(trailing_mean(ends, returns, points, window=10, last=40.0),
                               [np.nan, 1.0, 1.0, 2.0, 2.5, np.nan])


def test_one_run_bands_over_its_ranks(tmp_path):
    logdir = write_run(tmp_path / "run", "ALE/Pong-v5",
                        [(50, 0, -21), (60, 1, -19), (150, 0, -17), (160, 1, -13)], [(200, -15.0)], 200)
    loaded = load_run(logdir)
    assert loaded.frames_per_step == 4 and loaded.final_frames == 800
    np.testing.assert_array_equal(loaded.eval_frames, [800])
    np.testing.assert_array_equal(loaded.eval_returns, [-15])
    curve = make_curve("pong", [loaded], window=2, num_points=5)  # points 0, 200, 400, 600, 800 frames
    assert curve.group == "ranks" and curve.group_size == 2
    # The line: the run's last 2 episodes, both ranks' pooled. At 600 frames rank 0's episode ending at 600
    # counts; rank 1's, at 640, does not yet.
    np.testing.assert_allclose(curve.mean, [np.nan, -21.0, -20.0, -18.0, -15.0])
    # The band: each rank's last 2 / 2 = 1 episode.
    np.testing.assert_allclose(curve.low, [np.nan, -21.0, -21.0, -19.0, -17.0])
    np.testing.assert_allclose(curve.high, [np.nan, -21.0, -19.0, -17.0, -13.0])


def test_one_runs_line_is_its_ranks_pooled_episodes_so_rank_counts_compare(tmp_path):
    # 4 ranks, each ending one episode every 100 env steps of the job, returns rising by 1 per episode of the job:
    # the last 4 episodes of the job are the last 4 returns whatever the rank count, where each rank's own last 4
    # episodes would reach back 16 episodes of the job.
    episodes = [(100 * (index + 1), index % 4, float(index)) for index in range(16)]
    curve = make_curve("four", [load_run(write_run(tmp_path / "run", "CartPole-v1", episodes, [], 1600))],
                       window=4, num_points=2)  # points 0 and 1,600 env steps (CartPole: one frame per step)
    assert curve.group_size == 4
    np.testing.assert_allclose(curve.mean, [np.nan, (12.0 + 13.0 + 14.0 + 15.0) / 4])
    # The band: each rank's last 4 / 4 = 1 episode, ranks 0-3 ending on 12, 13, 14 and 15.
    np.testing.assert_allclose(curve.low, [np.nan, 12.0])
    np.testing.assert_allclose(curve.high, [np.nan, 15.0])


def test_several_runs_band_over_runs_and_stop_where_each_run_ends(tmp_path):
    short = load_run(write_run(tmp_path / "s0", "CartPole-v1", [(10, 0, 10), (10, 1, 20)], [], 100))
    long = load_run(write_run(tmp_path / "s1", "CartPole-v1", [(10, 0, 30), (150, 1, 50)], [], 200))
    curve = make_curve("dqn", [short, long], window=2, num_points=3)  # points 0, 100, 200
    assert curve.group == "runs" and curve.group_size == 2
    np.testing.assert_allclose(curve.mean, [np.nan, (15.0 + 30.0) / 2, 40.0])  # s0 ended at 100
    np.testing.assert_allclose(curve.low, [np.nan, 15.0, 40.0])
    np.testing.assert_allclose(curve.high, [np.nan, 30.0, 40.0])


@pytest.mark.parametrize("argument, expected", [
    ("runs/pong", ("pong", ["runs/pong"])),
    ("runs/pong/", ("pong", ["runs/pong/"])),
    ("dqn=runs/s0,runs/s1", ("dqn", ["runs/s0", "runs/s1"])),
])
def test_curve_arguments_are_an_optional_label_and_logdirs(argument, expected):
    assert parse_curve_argument(argument) == expected


def test_the_curves_command_draws_several_curves_into_a_png(tmp_path):
    a = write_run(tmp_path / "a", "ALE/Pong-v5", [(50, 0, -21), (60, 1, -20), (150, 0, -18)], [(200, -19.0)], 200)
    b = write_run(tmp_path / "b", "ALE/Pong-v5", [(40, 0, -20), (140, 1, -16)], [], 200)
    out = tmp_path / "curves.png"
    result = run([PYTHON, "-m", "hvd_dqn.reports.curves", f"one={a}", f"two={a},{b}", f"--out={out}"],
                 timeout=120)
    assert f"wrote {out}" in result.stdout
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert [path.name for path in tmp_path.iterdir() if path.suffix == ".png"] == ["curves.png"]


@pytest.mark.parametrize("arguments, message", [
    (["{tmp}/nowhere", "--out={tmp}/x.png"], "{tmp}/nowhere: no such folder"),
    (["{tmp}", "--out={tmp}/x.png"], "{tmp}: no episodes.csv"),
    (["{run}", "--out={tmp}/x.jpg"], "--out={tmp}/x.jpg: must end in .png"),
    (["{run}", "--out={tmp}/no/x.png"], "does not exist"),
    (["{run}", "--out={tmp}/x.png", "--window=0"], "--window=0: must be a positive number of episodes"),
])
def test_the_curves_command_names_the_problem_in_one_line(tmp_path, arguments, message):
    logdir = write_run(tmp_path / "run", "CartPole-v1", [(10, 0, 10)], [], 100)
    values = dict(tmp=tmp_path, run=logdir)
    result = run([PYTHON, "-m", "hvd_dqn.reports.curves"] + [a.format(**values) for a in arguments],
                 timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"python -m hvd_dqn.reports.curves: error: {message.format(**values)}" or \
        message.format(**values) in result.stderr.strip().splitlines()[-1]


def test_a_csv_without_the_needed_columns_is_named(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "episodes.csv").write_text("env_steps,return\n10,5\n")
    with pytest.raises(CurveError, match="no column env_frames, rank"):
        load_run(str(folder))


def test_window_means_put_each_episode_in_the_window_its_last_step_falls_in(tmp_path):
    from hvd_dqn.reports.curves import window_means

    # Breakout episodes ending at these env steps; windows of 1,000 env steps; the run logged to 2,500.
    logdir = write_run(tmp_path / "run", "ALE/Breakout-v5",
                        [(400, 0, 1.0), (1000, 0, 3.0), (1001, 0, 10.0), (1500, 0, 20.0), (2400, 0, 7.0)], [], 2500)
    rows = window_means(logdir, 1000)
    assert [(row.start, row.end, row.episodes, row.complete) for row in rows] == [
        (0, 1000, 2, True), (1000, 2000, 2, True), (2000, 3000, 1, False)]
    assert [row.mean_return for row in rows] == [2.0, 15.0, 7.0]
    with pytest.raises(CurveError, match="must be positive"):
        window_means(logdir, 0)


def test_a_curve_without_a_range_draws_no_band_and_the_runs_target_is_a_line(tmp_path, monkeypatch):
    """One rank's run has no range to draw: its legend names no band. A run with --stop_at_train_return gets that
    return as a dashed line, unless --target names another."""
    from hvd_dqn.reports import curves as plot_curves

    one_rank = write_run(tmp_path / "one", "CartPole-v1", [(100, 0, 20.0), (200, 0, 60.0)], [], 200)
    config = tmp_path / "one" / "config.json"
    config.write_text(json.dumps({"env_id": "CartPole-v1", "stop_at_train_return": 475.0}))
    two_ranks = write_run(tmp_path / "two", "CartPole-v1", [(100, 0, 20.0), (100, 1, 30.0)], [], 200)
    assert load_run(one_rank).target_return == 475.0 and load_run(two_ranks).target_return is None
    drawn = []
    monkeypatch.setattr("hvd_dqn.reports.curves.save_figure", lambda figure, path: drawn.append(figure))
    for argv, target in (([one_rank], 475.0), ([one_rank, "--target=300"], 300.0)):
        assert plot_curves.main([*argv, f"--out={tmp_path / 'x.png'}"]) == 0
        axes = drawn[-1].axes[0]
        assert [text.get_text() for text in axes.get_legend().get_texts()] == ["one", f"target {target:g}"]
        assert not axes.collections  # no band
        assert [line.get_ydata()[0] for line in axes.lines if line.get_linestyle() == "--"] == [target]
    assert plot_curves.main([two_ranks, f"--out={tmp_path / 'y.png'}"]) == 0
    axes = drawn[-1].axes[0]
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["two (band: range over 2 ranks)"]
    assert len(axes.collections) == 1
