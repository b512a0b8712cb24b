"""The config's shape: what every agent reads in TrainConfig (its groups read as its own), each agent's settings in
its class and nowhere else, one flag per setting, and `replace` that changes any of them."""

import dataclasses

import pytest

from hvd_dqn.agent import registry
from hvd_dqn.agent.configs import config_from_json, make_config, shared_setting_names
from hvd_dqn.config import GROUPS, TrainConfig


def test_the_config_holds_what_every_agent_reads_and_each_agent_only_its_own():
    assert len(dataclasses.fields(TrainConfig)) <= 45
    shared = set(shared_setting_names())
    assert {"env_id", "noop_max", "learning_rate", "pipeline", "logdir"} <= shared
    assert not {"batch_size", "replay_capacity", "target_update_period", "dueling", "num_quantiles"} & shared
    # an agent's setting and a shared one of one name would be one flag for two things
    assert not shared & set(registry.agent_setting_fields())
    group_names = [field.name for kind in GROUPS.values() for field in dataclasses.fields(kind)]
    assert len(group_names) == len(set(group_names)) and set(group_names) <= shared
    pqn = make_config(agent="pqn")
    assert "batch_size" not in pqn.setting_values() and not hasattr(pqn, "replay_capacity")
    qrdqn = make_config(agent="qrdqn")
    assert (qrdqn.batch_size, qrdqn.num_quantiles, qrdqn.double_dqn) == (64, 200, False)
    assert not hasattr(qrdqn, "layer_norm") and not hasattr(qrdqn, "loss")  # its loss is the quantile Huber loss


def test_replace_changes_a_setting_of_the_config_of_a_group_or_of_the_agent_and_nothing_else():
    config = make_config(agent="qrdqn", env_id="ALE/Breakout-v5")
    changed = config.replace(seed=3, noop_max=0, learning_rate=5e-5, xla=True, batch_size=32, kappa=2.0)
    assert (changed.seed, changed.noop_max, changed.learning_rate, changed.xla, changed.batch_size, changed.kappa) == \
        (3, 0, 5e-5, True, 32, 2.0)
    assert changed.atari.noop_max == 0 and changed.optimization.learning_rate == 5e-5
    assert changed.agent_settings.batch_size == 32 and config.batch_size == 64 and config.noop_max == 30
    unchanged = {name: value for name, value in changed.setting_values().items()
                 if name not in {"seed", "noop_max", "learning_rate", "xla", "batch_size", "kappa"}}
    assert unchanged == {name: config.setting_values()[name] for name in unchanged}
    with pytest.raises(TypeError, match="rollout_steps"):
        config.replace(rollout_steps=8)  # PQN's: not a setting of QR-DQN's config
    with pytest.raises(TypeError, match="keeps the agent"):
        config.replace(agent="dqn")


@pytest.mark.parametrize("agent", ["dqn", "qrdqn", "iqn", "c51", "pqn", "mdqn"])
def test_every_agents_config_reads_back_from_its_json_as_it_was(agent):
    config = make_config(agent=agent, noop_max=7, learning_rate=3e-4, pipeline="off", logdir="runs/x")
    assert config_from_json(config.to_json()) == config
    assert TrainConfig.json_values(config.to_json())["noop_max"] == 7  # the groups' settings are written flat
