"""Atari through ale-py's AtariVectorEnv: ids, life-loss and truncation signals, videos, and a short real
training run that checkpoints, evaluates, films and plots."""
import csv
import json
import re
import subprocess
import sys
import textwrap

import imageio.v2 as imageio
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from hvd_dqn.agent.policy import EpsilonGreedyActor
from hvd_dqn.agent.schedules import apex_epsilons
from hvd_dqn.agent.configs import make_config
from hvd_dqn.envs import (AtariSettings, atari_game, env_seeds, learning_discounts, make_env_for, make_vector_env,
                          probe_spec, spec_of)
from hvd_dqn.logdir import checkpoint
from hvd_dqn.logdir.video import check_video_path, record_episode, write_video

from conftest import PYTHON, REPO, horovodrun, python_module, run, subprocess_env


@pytest.mark.parametrize("env_id, game", [("pong", "pong"), ("Pong", "pong"), ("ALE/Pong-v5", "pong"),
                                          ("SpaceInvaders", "space_invaders"), ("ALE/MsPacman-v5", "ms_pacman"),
                                          ("CartPole-v1", None), ("Pongg", None)])
def test_atari_ids_are_game_names_or_ale_v5_ids(env_id, game):
    assert atari_game(env_id) == game


def test_unknown_game_names_where_to_find_valid_ids(tmp_path):
    result = python_module("hvd_dqn.train", ["--env_id=ALE/Pongg-v5", f"--logdir={tmp_path}"], timeout=120, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--env_id=ALE/Pongg-v5: unknown environment id" in result.stderr
    assert "ale_py.roms.get_all_rom_ids()" in result.stderr


@pytest.mark.parametrize("env_id", ["CartPole-v1", "ALE/Breakout-v5"])
def test_the_measurements_probe_the_spec_a_rank_trains_with(env_id):
    """probe_spec builds the networks of the benchmark and the cost model: it must read what the trainer's own
    env gives, whatever the config's emulator threads, from one env it closes again."""
    config = make_config().replace(env_id=env_id, num_envs=4, env_threads=2)
    env = make_env_for(config, config.num_envs)
    try:
        trained_with = spec_of(env)
    finally:
        env.close()
    assert probe_spec(config) == trained_with
    assert trained_with.num_actions == (2 if env_id == "CartPole-v1" else 4)


def test_breakout_reports_lost_lives_without_ending_the_episode():
    env = make_vector_env("breakout", 2, AtariSettings(repeat_action_probability=0.0, threads=1))
    spec = spec_of(env)
    assert spec.observation_shape == (4, 84, 84) and spec.observation_dtype == np.uint8
    observation, info = env.reset(seed=env_seeds(0, 2))
    assert observation[:, :3].max() == 0  # a fresh episode's stack: zero frames, then the first frame
    lives_lost = 0
    for _ in range(2000):  # fire, then do nothing: the ball is missed and lives go
        _, _, terminated, truncated, info = env.step(np.ones(2, np.int64))
        lives_lost += int(info["life_lost"].sum())
        assert not (info["life_lost"] & (terminated | truncated)).any()
        if lives_lost >= 2:
            break
    env.close()
    assert lives_lost >= 2


def test_atari_smoke_run_trains_checkpoints_and_evaluates(tmp_path):
    logdir = tmp_path / "run"
    result = horovodrun(2, [PYTHON, "-m", "hvd_dqn.train", f"--flagfile={REPO / 'configs' / 'atari_smoke.flags'}",
                            f"--logdir={logdir}"], timeout=900)
    assert "bytes per transition" in result.stdout + result.stderr
    reported = int((result.stdout + result.stderr).split(" bytes per transition")[0].rsplit(" ", 1)[-1])
    assert reported <= 7200
    counters = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert counters["env_steps"] == 3200 and counters["updates"] > 100
    assert counters["episodes"] > 0  # 300-step episodes were truncated and bootstrapped
    digests = counters["replica_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    with open(logdir / "metrics.csv") as handle:
        epsilons = {float(row["epsilon"]) for row in csv.DictReader(handle)}
    assert len(epsilons) == 1  # Ape-X: fixed per env, no schedule
    assert epsilons.pop() == pytest.approx(float(apex_epsilons(2 * 4).mean()), abs=1e-5)
    report = tmp_path / "eval.json"
    video = tmp_path / "pong.gif"
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2", "--epsilon=0.05", f"--json={report}",
                                       f"--video={video}", "--greedy_actions"], timeout=300)
    evaluation = json.loads(report.read_text())
    assert evaluation["episodes"] == 2 and evaluation["env_id"] == "ALE/Pong-v5"
    greedy = evaluation["greedy_actions"]  # every state of both episodes, Pong's six actions by name
    assert greedy["states"] == round(evaluation["mean_length"] * 2)
    assert list(greedy["greedy_action_shares"]) == ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]
    assert sum(greedy["greedy_action_shares"].values()) == pytest.approx(1.0, abs=1e-3)
    assert greedy["action_gap_median"] >= 0.0
    assert all(-21 <= score <= 21 and score == int(score) for score in evaluation["returns"])  # raw Pong scores
    assert evaluation["video"]["frames"] == evaluation["video"]["length"] + 1
    with Image.open(video) as image:
        assert image.size == (160, 210) and image.n_frames > 10
    with open(logdir / "episodes.csv") as handle:
        episodes = list(csv.DictReader(handle))
    assert {row["rank"] for row in episodes} == {"0", "1"} and len(episodes) == counters["episodes"]
    assert all(int(row["env_frames"]) == 4 * int(row["env_steps"]) for row in episodes)
    plot = tmp_path / "curve.png"
    run([PYTHON, "-m", "hvd_dqn.reports.curves", f"smoke={logdir}", f"--out={plot}", "--window=2"], timeout=120)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_truncation_at_the_frame_limit_bootstraps():
    """Hitting --max_episode_frames truncates (bootstrap, discount 1); it never terminates the episode."""
    env = make_vector_env("pong", 2, AtariSettings(max_episode_frames=400, threads=1))
    env.reset(seed=env_seeds(0, 2))
    for step in range(1, 150):  # 400 frames are at most 100 agent steps
        _, _, terminated, truncated, info = env.step(np.zeros(2, np.int64))
        if (terminated | truncated).any():
            break
    env.close()
    assert truncated.all() and not terminated.any() and step <= 100
    np.testing.assert_array_equal(learning_discounts(terminated, info, terminal_on_life_loss=True), [1.0, 1.0])


def test_a_lost_life_is_terminal_for_learning_only_when_asked():
    env = make_vector_env("breakout", 1, AtariSettings(repeat_action_probability=0.0, threads=1))
    env.reset(seed=env_seeds(1, 1))
    for _ in range(2000):
        _, _, terminated, truncated, info = env.step(np.ones(1, np.int64))
        if info["life_lost"].any():
            break
    env.close()
    assert info["life_lost"].all() and not (terminated | truncated).any()
    assert learning_discounts(terminated, info, terminal_on_life_loss=True).tolist() == [0.0]
    assert learning_discounts(terminated, info, terminal_on_life_loss=False).tolist() == [1.0]


class _PreferFire(tf.keras.Model):
    """A fixed policy: always the second action (FIRE in Pong's minimal set)."""

    def call(self, observation, training=False):
        return tf.tile(tf.constant([[0.0, 1.0, 0.0, 0.0, 0.0, 0.0]]), [tf.shape(observation)[0], 1])


def test_atari_video_films_the_colour_screen_of_the_agents_game(tmp_path):
    config = make_config().replace(env_id="ALE/Pong-v5", max_episode_frames=800)
    actor = EpsilonGreedyActor(_PreferFire(), 6, np.random.default_rng(0))
    episode = record_episode(actor, config, epsilon=0.0, seed=7)
    assert 0 < episode.length <= 200 and len(episode.frames) == episode.length + 1
    assert episode.frames_per_second == 15.0  # 60 Hz console, one frame per 4-frame agent step
    screen = np.stack(episode.frames)
    assert screen.shape[1:] == (210, 160, 3) and screen.dtype == np.uint8
    assert (screen[..., 0] != screen[..., 2]).any()  # colour, not grayscale
    again = record_episode(actor, config, epsilon=0.0, seed=7)  # same seed, same policy: the same game
    np.testing.assert_array_equal(np.stack(again.frames), screen)
    gif, mp4 = tmp_path / "pong.gif", tmp_path / "pong.mp4"
    write_video(str(gif), episode.frames[:40], episode.frames_per_second)
    write_video(str(mp4), episode.frames[:40], episode.frames_per_second)
    with Image.open(gif) as image:
        assert image.size == (160, 210) and image.n_frames > 1
        durations = []
        for index in range(image.n_frames):  # Pillow merges identical frames, adding their durations
            image.seek(index)
            durations.append(image.info["duration"])
    assert 40 * 60 <= sum(durations) <= 40 * 70  # 40 frames at 15 fps; GIF delays are in 10 ms units
    reader = imageio.get_reader(str(mp4), format="FFMPEG")
    decoded = [frame for frame in reader]
    reader.close()
    assert len(decoded) == 40 and decoded[0].shape == (210, 160, 3)
    # Lossy H.264, yet close to the screen it encoded.
    assert np.abs(decoded[20].astype(int) - episode.frames[20].astype(int)).mean() < 8
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pong.gif", "pong.mp4"]  # no temporary files


def test_classic_control_video_uses_gymnasiums_rendering(tmp_path):
    config = make_config().replace(env_id="CartPole-v1")
    actor = EpsilonGreedyActor(_FixedQ2(), 2, np.random.default_rng(0))
    episode = record_episode(actor, config, epsilon=0.0, seed=0)
    assert len(episode.frames) == episode.length + 1 and episode.episode_return == episode.length
    assert episode.frames[0].shape == (400, 600, 3)
    write_video(str(tmp_path / "cartpole.mp4"), episode.frames, episode.frames_per_second)
    assert (tmp_path / "cartpole.mp4").stat().st_size > 0


def test_filming_classic_control_without_a_display_writes_nothing_to_stderr(tmp_path):
    """pygame's start-up on a host without a display made SDL write "error: XDG_RUNTIME_DIR is invalid or not set"
    for a video that was written fine; filmed in a process of its own (pygame starts once per process), with no
    display in its environment, nothing reaches stderr."""
    code = textwrap.dedent(f"""
        import numpy as np
        from hvd_dqn.agent.configs import make_config
        from hvd_dqn.logdir.video import record_episode, write_video

        class Left:
            def select_actions(self, observation, epsilon):
                return np.zeros(len(observation), dtype=np.int64)

        episode = record_episode(Left(), make_config(env_id="CartPole-v1"), epsilon=0.0, seed=0)
        write_video({str(tmp_path / "cartpole.mp4")!r}, episode.frames, episode.frames_per_second)
    """)
    environment = {name: value for name, value in subprocess_env().items()
                   if name not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                            timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert (tmp_path / "cartpole.mp4").stat().st_size > 0


class _FixedQ2(tf.keras.Model):
    def call(self, observation, training=False):
        return tf.tile(tf.constant([[0.0, 1.0]]), [tf.shape(observation)[0], 1])


@pytest.mark.parametrize("path, problem", [("clip.avi", "unsupported format .avi; use one of .mp4, .gif"),
                                           ("clip", "unsupported format (none)"),
                                           ("missing/clip.gif", "does not exist")])
def test_bad_video_paths_are_refused_before_playing(tmp_path, path, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        check_video_path(str(tmp_path / path))


@pytest.mark.parametrize("fire_reset", [True, False])
def test_without_fire_reset_breakout_waits_for_the_agent_to_serve(fire_reset):
    """ale-py presses FIRE at reset unless told not to; Dopamine's protocol does not, so an agent that never
    presses FIRE sees a frozen screen and loses no life."""
    settings = AtariSettings(repeat_action_probability=0.0, noop_max=0, threads=1, fire_reset=fire_reset)
    env = make_vector_env("breakout", 1, settings)
    observation, info = env.reset(seed=env_seeds(0, 1))
    frames, lives = [observation[0, -1]], []
    for _ in range(300):  # NOOP only
        observation, _, _, _, info = env.step(np.zeros(1, np.int64))
        frames.append(observation[0, -1])
        lives.append(int(info["lives"][0]))
    env.close()
    screen_changed = any(not np.array_equal(frames[1], frame) for frame in frames[2:])
    if fire_reset:  # the ball was served, moved, and was missed
        assert screen_changed and min(lives) < 5
    else:
        assert not screen_changed and set(lives) == {5}
