"""Atari through ale-py's AtariVectorEnv: ids, life-loss signals, and a short real training run."""
import csv
import json

import numpy as np
import pytest

from conftest import PYTHON, REPO, horovodrun, python_module
from hvd_dqn import checkpoint
from hvd_dqn.envs import AtariSettings, atari_game, env_seeds, make_vector_env, spec_of
from hvd_dqn.schedules import apex_epsilons


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
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2", "--epsilon=0.05", f"--json={report}"],
                  timeout=300)
    evaluation = json.loads(report.read_text())
    assert evaluation["episodes"] == 2 and evaluation["env_id"] == "ALE/Pong-v5"
    assert all(-21 <= score <= 21 and score == int(score) for score in evaluation["returns"])  # raw Pong scores
