"""The registry of agents: lookups and their one-line errors, settings refused by ownership, and an agent defined
outside the package, installed as a plugin (an entry point), trained, resumed, evaluated and exported with the
shipped commands while no file of hvd_dqn changes."""
import dataclasses
import json
import os
import subprocess
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from hvd_dqn.agent import registry
from hvd_dqn.logdir import checkpoint
from hvd_dqn.settings import AgentSettings

from conftest import REPO, environment, python_module, train_error_line


def test_the_built_in_agents_are_registered_with_what_they_learn_from():
    built_in = ["dqn", "qrdqn", "iqn", "c51", "pqn", "mdqn"]
    assert [entry.name for entry in registry.entries()][:6] == built_in
    assert {entry.name: entry.memory for entry in registry.entries() if entry.name in built_in} \
        == {"dqn": "replay", "qrdqn": "replay", "iqn": "replay", "c51": "replay", "pqn": "rollout", "mdqn": "replay"}
    assert registry.implementation("qrdqn").__name__ == "QRDQNAgent"
    assert registry.implementation("c51").__name__ == "C51Agent"
    with pytest.raises(registry.UnknownAgent, match=r"^--agent=c52: unknown agent; did you mean --agent=c51\? the "
                                                    r"agents are dqn, qrdqn, iqn, c51, pqn, mdqn$"):
        registry.entry("c52")
    with pytest.raises(registry.UnknownAgent, match=r"^--agent=xyz: unknown agent; the agents are dqn, qrdqn, iqn"):
        registry.entry("xyz")


@pytest.mark.parametrize("name", ["rainbow", "Rainbow"])
def test_a_name_users_know_an_agent_by_says_how_to_train_it(name):
    with pytest.raises(registry.UnknownAgent) as raised:
        registry.entry(name)
    assert str(raised.value) == (
        f"--agent={name}: not an agent of its own; Dopamine's Rainbow is --agent=c51 with "
        "configs/breakout_rainbow.flags (3-step returns and prioritised replay); add --noisy_nets --dueling "
        "--double_dqn for Hessel et al.'s full Rainbow")


def test_a_setting_is_refused_only_for_agents_that_do_not_own_it():
    assert registry.settings_problem("qrdqn", {"num_quantiles": 8, "n_step": 3, "double_dqn": True}) is None
    assert registry.settings_problem("dqn", {"env_id": "Pong"}) is None  # every agent reads it: nobody owns it
    assert registry.settings_problem("pqn", {"double_dqn": True}) == (
        "--double_dqn=true: a setting of DQN, QR-DQN, IQN and C51 (the target network); --agent=pqn learns from each "
        "rollout without a replay memory or target network. Leave it out, or use --agent=dqn")


@pytest.mark.parametrize("where", ["command line", "flagfile"])
def test_another_agents_setting_is_refused_even_at_its_default(tmp_path, where):
    """C51's 51 atoms typed for QR-DQN (its default, so the value alone cannot tell) would otherwise be taken
    silently; named on the command line or in a flagfile, it is refused in one line and nothing is written."""
    logdir = tmp_path / "run"
    flags = ["--flagfile=configs/cartpole_qrdqn.flags", f"--logdir={logdir}"]
    if where == "flagfile":
        flagfile = tmp_path / "mine.flags"
        flagfile.write_text("--flagfile=configs/cartpole_qrdqn.flags\n--num_atoms=51\n")
        flags = [f"--flagfile={flagfile}", f"--logdir={logdir}"]
    else:
        flags.append("--num_atoms=51")
    assert train_error_line(flags) == (
        "hvd_dqn.train: error: --num_atoms=51: a setting of C51 (the return's categorical distribution); "
        "--agent=qrdqn learns quantiles of the return with the quantile Huber loss (--kappa). Leave it out, or use "
        "--agent=c51")
    assert not (logdir / "config.json").exists()


def test_the_runner_refuses_another_agents_setting_named_in_its_flagfile_or_keywords():
    from hvd_dqn.config import ConfigError
    from hvd_dqn.runner import Runner

    with pytest.raises(ConfigError, match=r"^--num_quantiles=10: a setting of QR-DQN"):
        Runner.from_flagfile("configs/cartpole_qrdqn.flags", agent="c51")
    with pytest.raises(ConfigError, match=r"^--num_atoms=51: a setting of C51"):
        Runner.from_flagfile("configs/cartpole_qrdqn.flags", num_atoms=51)
    with pytest.raises(ConfigError, match=r"^--kappa=1.0: a setting of QR-DQN and IQN"):
        Runner(agent="dqn", kappa=1.0)
    assert Runner.from_flagfile("configs/cartpole_qrdqn.flags", kappa=1.0).config.kappa == 1.0  # its own: taken


def test_an_entry_names_its_class_and_memory_properly_and_a_name_is_registered_once():
    fields = dict(name="x", title="X", summary="x", without_them="x")
    tape = dataclasses.make_dataclass("TapeSettings", [], bases=(AgentSettings,), frozen=True,
                                      namespace={"memory": "tape"})
    with pytest.raises(ValueError, match="its settings' memory must be one of replay, rollout, not 'tape'"):
        registry.AgentEntry(implementation="m:C", settings_class=tape, **fields)
    rollout = dataclasses.make_dataclass("RollSettings", [], bases=(AgentSettings,), frozen=True,
                                         namespace={"memory": "rollout"})
    with pytest.raises(ValueError, match="learns from a rollout has settings subclassing hvd_dqn.settings.RolloutSettings"):
        registry.AgentEntry(implementation="m:C", settings_class=rollout, **fields)
    with pytest.raises(ValueError, match="settings_class must be a dataclass subclassing hvd_dqn.settings.AgentSettings"):
        registry.AgentEntry(implementation="m:C", settings_class=dict, **fields)
    with pytest.raises(ValueError, match="implementation must read 'module:Class'"):
        registry.AgentEntry(implementation="m.C", **fields)
    with pytest.raises(ValueError, match=r"--agent=dqn is registered already, by hvd_dqn.agent.dqn.agent:DQNAgent"):
        registry.register(registry.AgentEntry(**{**fields, "name": "dqn"}, implementation="elsewhere:Agent"))


# An agent of another package: expected SARSA (van Seijen et al. 2009) for an epsilon-greedy policy of its own
# setting --target_epsilon, bootstrapping from (1 - eps) max_a Q + eps mean_a Q of the target network. DQN's replay,
# target network and schedule; its own learner's targets; the settings of the replay memory and target network and
# of the TD loss, composed of DQN's groups, and one of its own, declared beside it as a built-in agent's are.
PLUGIN = '''
"""Expected SARSA on hvd_dqn's DQN machinery, registered through the hvd_dqn.agents entry point."""
import dataclasses

from hvd_dqn.agent.dqn.settings import ReplaySettings, TDLossSettings
from hvd_dqn.agent.registry import AgentEntry
from hvd_dqn.settings import in_unit_interval, setting


@dataclasses.dataclass(frozen=True)
class ExpectedSarsaSettings(ReplaySettings, TDLossSettings):
    target_epsilon: float = setting(
        0.05, "Expected SARSA: epsilon of the epsilon-greedy policy whose expected Q-value the targets bootstrap "
              "from.", purpose="the policy its targets expect", check=in_unit_interval)


AGENT = AgentEntry(
    name="expected_sarsa", title="Expected SARSA",
    summary="Expected SARSA for the epsilon-greedy policy (van Seijen et al. 2009), from a replay memory.",
    implementation="expected_sarsa_agent.agent:ExpectedSarsaAgent",
    settings_class=ExpectedSarsaSettings,
    without_them="bootstraps from the expected Q-value of its epsilon-greedy policy")
'''
PLUGIN_AGENT = '''
import tensorflow as tf

from hvd_dqn.agent.dqn.agent import DQNAgent
from hvd_dqn.agent.dqn.learner import DQNLearner


class ExpectedSarsaLearner(DQNLearner):
    epsilon = 0.05

    @classmethod
    def from_config(cls, config, online, target, world_size, distributed=True):
        learner = super().from_config(config, online, target, world_size, distributed)
        learner.epsilon = config.target_epsilon
        print(f"targets expect epsilon {learner.epsilon}", flush=True)
        return learner

    def _targets(self, reward_t, discount_t, observation_t):
        q_t = self._target_forward(observation_t, training=False)
        expected = (1.0 - self.epsilon) * tf.reduce_max(q_t, axis=-1) + self.epsilon * tf.reduce_mean(q_t, axis=-1)
        return tf.stop_gradient(reward_t + discount_t * expected)


class ExpectedSarsaAgent(DQNAgent):
    learner_class = ExpectedSarsaLearner
'''


def _install_plugin(folder):
    """The plugin as pip would leave it: its package and a dist-info whose entry point names its AGENT."""
    package = folder / "expected_sarsa_agent"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    (package / "agent.py").write_text(textwrap.dedent(PLUGIN_AGENT))
    info = folder / "expected_sarsa_agent-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: expected-sarsa-agent\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hvd_dqn.agents]\nexpected_sarsa = expected_sarsa_agent:AGENT\n")


def _package_state():
    return subprocess.run(["git", "status", "--porcelain", "--", "hvd_dqn"], capture_output=True, text=True,
                          cwd=REPO, check=True).stdout


RUN = ["--agent=expected_sarsa", "--env_id=CartPole-v1", "--num_envs=2", "--learning_starts=200", "--batch_size=32",
       "--train_frequency=4", "--hidden_sizes=32,32", "--eval_interval_env_steps=0", "--log_interval_env_steps=500",
       "--checkpoint_interval_env_steps=1000", "--checkpoint_replay"]


def test_an_agent_from_another_package_trains_resumes_evaluates_and_exports_with_the_shipped_commands(tmp_path):
    """The plugin's own setting is a flag of hvd_dqn.train (listed by --helpfull under its agent, checked, refused for
    another agent in one line), reaches its learner, is written to config.json and read back by --resume, evaluate
    and export."""
    before = _package_state()
    plugin, logdir, out = tmp_path / "site", tmp_path / "run", tmp_path / "policy"
    _install_plugin(plugin)
    with environment(PYTHONPATH=f"{plugin}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"):
        listed = python_module("hvd_dqn.train", ["--help"], timeout=120).stdout
        assert "expected_sarsa: Expected SARSA for the epsilon-greedy policy" in " ".join(listed.split())
        full = " ".join(python_module("hvd_dqn.train", ["--helpfull"], timeout=120, check=False).stdout.split())
        assert ("--target_epsilon: Expected SARSA: epsilon of the epsilon-greedy policy whose expected Q-value the "
                "targets bootstrap from. [--agent=expected_sarsa] (default: '0.05')") in full
        refused = python_module("hvd_dqn.train", [*RUN, f"--logdir={logdir}", "--num_quantiles=8"], check=False)
        assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
            "hvd_dqn.train: error: --num_quantiles=8: a setting of QR-DQN (the quantiles of the return); "
            "--agent=expected_sarsa bootstraps from the expected Q-value of its epsilon-greedy policy. Leave it "
            "out, or use --agent=qrdqn"]
        assert train_error_line(["--flagfile=configs/cartpole.flags", "--target_epsilon=0.05",
                                 f"--logdir={tmp_path / 'dqn'}"]) == (
            "hvd_dqn.train: error: --target_epsilon=0.05: a setting of Expected SARSA (the policy its targets "
            "expect); --agent=dqn learns one Q-value per action. Leave it out, or use --agent=expected_sarsa")
        assert train_error_line([*RUN, f"--logdir={logdir}", "--target_epsilon=1.5"]) == (
            "hvd_dqn.train: error: --target_epsilon=1.5: must be in [0, 1]")
        first = python_module("hvd_dqn.train", [*RUN, f"--logdir={logdir}", "--total_env_steps=1000",
                                                "--target_epsilon=0.2"], timeout=300)
        assert "targets expect epsilon 0.2" in first.stdout + first.stderr
        resumed = python_module("hvd_dqn.train", [*RUN, f"--logdir={logdir}", "--total_env_steps=2000", "--resume",
                                                  "--target_epsilon=0.2"], timeout=300)
        assert "targets expect epsilon 0.2" in resumed.stdout + resumed.stderr
        report = tmp_path / "eval.json"
        python_module("hvd_dqn.evaluate", [f"--logdir={logdir}", "--episodes=2", f"--json={report}"], timeout=300)
        python_module("hvd_dqn.export", [f"--logdir={logdir}", f"--out={out}"], timeout=300)
    final = checkpoint.read_counters(checkpoint.latest_checkpoint(str(logdir)))
    assert final["env_steps"] == 2000 and final["updates"] > 0
    saved = json.loads((logdir / "config.json").read_text())
    assert saved["agent"] == "expected_sarsa" and saved["target_epsilon"] == 0.2
    assert json.loads(report.read_text())["episodes"] == 2
    served = tf.saved_model.load(str(out)).signatures["serving_default"](observation=tf.zeros((3, 4)))
    assert served["q_values"].shape == (3, 2) and np.all(np.isfinite(served["q_values"].numpy()))
    assert _package_state() == before  # no file of hvd_dqn was edited
