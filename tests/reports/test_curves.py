"""Learning curves: the trailing means and bands, and hvd_dqn.reports.curves on hand-written logdirs."""
import csv
import json

import numpy as np
import pytest

from hvd_dqn.reports.curves import CurveError, load_run, make_curve, parse_curve_argument, trailing_mean

from conftest import PYTHON, run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_trailing_mean_averages_the_last_window_episodes_before_each_point():
    ends = np.array([30.0, 10.0, 20.0, 40.0])  # unsorted on purpose
    returns = np.array([3.0, 1.0, 2.0, 4.0])
    points = np.array([0.0, 10.0, 15.0, 30.0, 40.0, 50.0])
    np.testing.assert_allclose(trailing_mean(ends, returns, points, window=2),
                               [np.nan, 1.0, 1.0, 2.5, 3.5, 3.5])
    np.testing.assert_allclose(trailing_mean(ends, returns, points, window=10, last=40.0),
                               [np.nan, 1.0, 1.0, 2.0, 2.5, np.nan])


def _write_run(folder, env_id, episodes, evals, final_env_steps):
    """A logdir as hvd_dqn.train writes it: episodes (env_steps, rank, return), evals (env_steps, return)."""
    frames = 4 if env_id.startswith("ALE/") else 1
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"env_id": env_id}))
    with open(folder / "episodes.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "rank", "env", "return", "length"])
        for env_steps, rank, episode_return in episodes:
            writer.writerow([env_steps, env_steps * frames, rank, 0, episode_return, 10])
    eval_at = dict(evals)
    with open(folder / "metrics.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "eval_return_mean"])
        for env_steps in range(100, final_env_steps + 1, 100):
            writer.writerow([env_steps, env_steps * frames, eval_at.get(env_steps, "")])
    return str(folder)


def test_one_run_bands_over_its_ranks(tmp_path):
    logdir = _write_run(tmp_path / "run", "ALE/Pong-v5",
                        [(50, 0, -21), (60, 1, -19), (150, 0, -17), (160, 1, -13)], [(200, -15.0)], 200)
    loaded = load_run(logdir)
    assert loaded.frames_per_step == 4 and loaded.final_frames == 800
    np.testing.assert_array_equal(loaded.eval_frames, [800]) and np.testing.assert_array_equal(loaded.eval_returns, [-15])
    curve = make_curve("pong", [loaded], window=1, num_points=5)  # points 0, 200, 400, 600, 800 frames
    assert curve.group == "ranks" and curve.group_size == 2
    # At 600 frames rank 0's episode ending at 600 counts; rank 1's, at 640, does not yet.
    np.testing.assert_allclose(curve.mean, [np.nan, -21.0, -20.0, -18.0, -15.0])
    np.testing.assert_allclose(curve.low, [np.nan, -21.0, -21.0, -19.0, -17.0])
    np.testing.assert_allclose(curve.high, [np.nan, -21.0, -19.0, -17.0, -13.0])


def test_several_runs_band_over_runs_and_stop_where_each_run_ends(tmp_path):
    short = load_run(_write_run(tmp_path / "s0", "CartPole-v1", [(10, 0, 10), (10, 1, 20)], [], 100))
    long = load_run(_write_run(tmp_path / "s1", "CartPole-v1", [(10, 0, 30), (150, 1, 50)], [], 200))
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
    a = _write_run(tmp_path / "a", "ALE/Pong-v5", [(50, 0, -21), (60, 1, -20), (150, 0, -18)], [(200, -19.0)], 200)
    b = _write_run(tmp_path / "b", "ALE/Pong-v5", [(40, 0, -20), (140, 1, -16)], [], 200)
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
    logdir = _write_run(tmp_path / "run", "CartPole-v1", [(10, 0, 10)], [], 100)
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
    logdir = _write_run(tmp_path / "run", "ALE/Breakout-v5",
                        [(400, 0, 1.0), (1000, 0, 3.0), (1001, 0, 10.0), (1500, 0, 20.0), (2400, 0, 7.0)], [], 2500)
    rows = window_means(logdir, 1000)
    assert [(row.start, row.end, row.episodes, row.complete) for row in rows] == [
        (0, 1000, 2, True), (1000, 2000, 2, True), (2000, 3000, 1, False)]
    assert [row.mean_return for row in rows] == [2.0, 15.0, 7.0]
    with pytest.raises(CurveError, match="must be positive"):
        window_means(logdir, 0)


def test_compare_to_baseline_prints_the_windows_beside_dopamines_published_numbers(tmp_path):
    # Two windows of Dopamine's 250k agent steps: means 1.5 and 6.0, against DQN's 1.8 [1.6, 1.9] and
    # 7.1 [5.6, 8.1] (google/dopamine, baselines/atari/data/breakout_CNN.json).
    logdir = _write_run(tmp_path / "run", "ALE/Breakout-v5",
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
    logdir = _write_run(tmp_path / "run", "ALE/Breakout-v5", [(100, 0, 1.0)], [], 200)
    result = run([PYTHON, "-m", "hvd_dqn.reports.baseline", logdir, *arguments], timeout=120,
                 check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"python -m hvd_dqn.reports.baseline: error: {message}"


def _write_suite_run(folder, env_id, seed, window_return, seconds=4000.0, config=None, total=1_000_000):
    """A run of `total` agent steps: an episode of return 0 every 50k steps, then `window_return` in its last 250k
    (per 1M agent steps, `seconds` of training)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"env_id": env_id, "seed": seed, "agent": "pqn",
                                                    "total_env_steps": total, **(config or {})}))
    with open(folder / "episodes.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "rank", "env", "return", "length", "wall_s"])
        for env_steps in range(50_000, total + 1, 50_000):
            episode_return = window_return if env_steps > total - 250_000 else 0.0
            writer.writerow([env_steps, env_steps * 4, 0, 0, episode_return, 1000, seconds * env_steps / 1e6])
    with open(folder / "metrics.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "eval_return_mean"])
        writer.writerow([total, total * 4, ""])
    return str(folder)


def test_the_atari_suite_tables_each_game_and_agent_against_dopamines_same_agent(tmp_path):
    """Dopamine's published returns (google/dopamine baselines/atari/data/<game>_CNN.json), iteration 3: Pong DQN
    -13.7 [-16.0, -11.6], Rainbow -16.7, QR-DQN 7.4 [4.9, 10.1]; SpaceInvaders DQN 415.9, Rainbow 401.2;
    iteration 1 (250k-500k): Qbert Rainbow 450.8 [433.1, 476.9], DQN 464.0."""
    qrdqn, rainbow = {"agent": "qrdqn"}, {"agent": "c51", "n_step": 3, "prioritized_replay": True}
    runs = [_write_suite_run(tmp_path / "pong0", "ALE/Pong-v5", 0, -10.0),
            _write_suite_run(tmp_path / "pong1", "ALE/Pong-v5", 1, -16.0, seconds=5000.0),
            _write_suite_run(tmp_path / "invaders0", "ALE/SpaceInvaders-v5", 0, 400.0),
            _write_suite_run(tmp_path / "pong_qrdqn", "ALE/Pong-v5", 0, 5.0, config=qrdqn),
            _write_suite_run(tmp_path / "qbert_rainbow", "ALE/Qbert-v5", 0, 440.0, config=rainbow, total=500_000)]
    out = tmp_path / "suite"
    result = run([PYTHON, "-m", "hvd_dqn.reports.suite", *runs, f"--out={out}"], timeout=120)
    lines = result.stdout.splitlines()
    assert ("| pong | PQN | 750k-1M | 2 | **-13.0** [-16.0, -10.0] | none published | - | -13.7 [-16.0, -11.6] | "
            "-16.7 [-19.6, -14.1] | yes | 250, 200 |") in lines  # 1M steps in 4,000 and 5,000 s
    assert ("| pong | QR-DQN | 750k-1M | 1 | **5.0** | QR-DQN: 7.4 [4.9, 10.1] | yes | -13.7 [-16.0, -11.6] | "
            "-16.7 [-19.6, -14.1] | yes | 250 |") in lines
    assert any(line.startswith("| spaceinvaders | PQN | 750k-1M | 1 | **400.0** | none published | - | 415.9")
               and line.endswith("| no | 250 |") for line in lines)
    assert any(line.startswith("| qbert | Rainbow | 250k-500k | 1 | **440.0** | Rainbow: 450.8 [433.1, 476.9] | yes "
                               "| 464.0") and line.endswith("| no | 250 |") for line in lines)
    assert "PQN: above Dopamine's DQN on 1 of 2 games, above its Rainbow on 1 of 2." in lines
    assert "QR-DQN: above Dopamine's DQN on 1 of 1 games, within or above the range of Dopamine's QR-DQN on 1 of 1." \
        in lines
    assert "Rainbow: above Dopamine's DQN on 0 of 1 games, within or above the range of Dopamine's Rainbow on 1 of 1." \
        in lines
    written = json.loads((tmp_path / "suite.json").read_text())
    assert written["agents"]["PQN"]["above_dqn"] == 1 and written["agents"]["QR-DQN"]["within_or_above_same"] == 1
    assert (tmp_path / "suite.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "suite.md").read_text().strip() == result.stdout.strip()


def test_the_atari_suite_refuses_runs_of_one_agent_in_different_windows(tmp_path):
    runs = [_write_suite_run(tmp_path / "long", "ALE/Pong-v5", 0, -10.0),
            _write_suite_run(tmp_path / "short", "ALE/Pong-v5", 1, -10.0, total=500_000)]
    result = run([PYTHON, "-m", "hvd_dqn.reports.suite", *runs, f"--out={tmp_path / 'suite'}"],
                 timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("python -m hvd_dqn.reports.suite: error: PQN on pong: runs of different windows "
                                     "(1, 3); give --window to compare them in one")


def test_the_atari_suite_refuses_a_run_short_of_the_window(tmp_path):
    folder = tmp_path / "short"
    _write_suite_run(folder, "ALE/Pong-v5", 0, -10.0)
    metrics = folder / "metrics.csv"
    metrics.write_text("env_steps,env_frames,eval_return_mean\n600000,2400000,\n")
    episodes = (folder / "episodes.csv").read_text().splitlines()
    (folder / "episodes.csv").write_text("\n".join(episodes[:13]) + "\n")  # to 600k agent steps
    result = run([PYTHON, "-m", "hvd_dqn.reports.suite", str(folder), f"--out={tmp_path / 'suite'}"],
                 timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"python -m hvd_dqn.reports.suite: error: {folder}: the run did not reach the end "
                                     "of window 3 (1,000,000 agent steps)")


def test_a_curve_without_a_range_draws_no_band_and_the_runs_target_is_a_line(tmp_path, monkeypatch):
    """One rank's run has no range to draw: its legend names no band. A run with --stop_at_train_return gets that
    return as a dashed line, unless --target names another."""
    from hvd_dqn.reports import curves as plot_curves

    one_rank = _write_run(tmp_path / "one", "CartPole-v1", [(100, 0, 20.0), (200, 0, 60.0)], [], 200)
    config = tmp_path / "one" / "config.json"
    config.write_text(json.dumps({"env_id": "CartPole-v1", "stop_at_train_return": 475.0}))
    two_ranks = _write_run(tmp_path / "two", "CartPole-v1", [(100, 0, 20.0), (100, 1, 30.0)], [], 200)
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
