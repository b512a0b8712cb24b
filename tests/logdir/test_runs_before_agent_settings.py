"""Runs written before the agents had settings of their own (every agent's settings flat in one config.json) read
back with their agent's settings, act as they did, and resume, evaluate and export; so does every config.json the
evidence in results/ holds. The runs and how they were written: tests/data/before_agent_settings/."""
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent import registry
from hvd_dqn.agent.configs import check_agent, config_from_json
from hvd_dqn.agent.reload import load_online_network
from hvd_dqn.logdir.checkpoint import latest_checkpoint, read_counters

from conftest import REPO, python_module

RUNS = REPO / "tests" / "data" / "before_agent_settings"
# Each run's preset and the flags it was written with, its checkpoint, and the settings of its agent it had changed.
WRITTEN = {
    "qrdqn": (["--flagfile=configs/cartpole_qrdqn.flags", "--num_quantiles=8", "--hidden_sizes=32,32", "--num_envs=4",
               "--learning_starts=400", "--batch_size=32", "--replay_capacity=4000", "--eval_interval_env_steps=0",
               "--log_interval_env_steps=500"], "ckpt-000000001000", {"num_quantiles": 8, "kappa": 1.0}),
    "pqn": (["--flagfile=configs/cartpole_pqn.flags", "--hidden_sizes=32,32", "--rollout_steps=32",
             "--eval_interval_env_steps=0", "--log_interval_env_steps=512"], "ckpt-000000001024",
            {"rollout_steps": 32}),
}


@pytest.mark.parametrize("agent", sorted(WRITTEN))
def test_an_old_run_reads_back_with_its_agents_settings_and_acts_as_it_did(agent):
    _, checkpoint_name, own = WRITTEN[agent]
    checkpoint = RUNS / agent / "checkpoints" / checkpoint_name
    flat = json.loads((checkpoint / "config.json").read_text())
    assert {"num_atoms", "rollout_steps", "num_quantiles"} <= set(flat)  # every agent's settings, as then written
    config = config_from_json((checkpoint / "config.json").read_text())
    assert type(config.agent_settings) is registry.entry(agent).settings_class
    assert {name: getattr(config, name) for name in own} == own
    check_agent(config)  # the other agents' settings it held are not its own, and not refused
    written = json.loads((RUNS / "q_values.json").read_text())
    _, env, online = load_online_network(str(checkpoint))
    env.close()
    np.testing.assert_allclose(online(np.asarray(written["observations"], np.float32)).numpy(),
                               written["q_values"][agent], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("agent", sorted(WRITTEN))
def test_an_old_run_resumes_evaluates_and_exports(tmp_path, agent):
    flags, checkpoint_name, _ = WRITTEN[agent]
    logdir = tmp_path / "run"
    shutil.copytree(RUNS / agent / "checkpoints", logdir / "checkpoints")
    before = read_counters(str(logdir / "checkpoints" / checkpoint_name))
    steps = 2 * before["env_steps"]
    python_module("hvd_dqn.train", [*flags, f"--logdir={logdir}", "--resume", f"--total_env_steps={steps}",
                                    f"--checkpoint_interval_env_steps={steps}"], timeout=300)
    resumed = read_counters(latest_checkpoint(str(logdir)))
    assert resumed["env_steps"] == steps and resumed["updates"] > before["updates"]
    report = tmp_path / "eval.json"
    python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2", f"--json={report}"], timeout=300)
    assert json.loads(report.read_text())["episodes"] == 2
    out = tmp_path / "policy"
    python_module("hvd_dqn.export", [f"--logdir={logdir}", f"--out={out}"], timeout=300)
    served = tf.saved_model.load(str(out)).signatures["serving_default"](observation=tf.zeros((3, 4)))
    assert served["q_values"].shape == (3, 2)


def test_every_config_json_of_the_evidence_reads_back_with_its_agents_settings():
    """The config.json of every run in results/ (written by every version since the first) reads back with the
    settings class of its agent, holding the values it wrote for that agent's own settings, and passes the
    agent's checks."""
    paths = sorted((REPO / "results").rglob("config.json"))
    assert len(paths) > 300
    for path in paths:
        flat = json.loads(path.read_text())
        config = config_from_json(path.read_text())
        assert type(config.agent_settings) is registry.entry(config.agent).settings_class, path
        own = config.agent_settings.values()
        assert {name: flat[name] for name in own if name in flat} == {name: own[name] for name in own if name in flat}
        check_agent(config)
