"""Munchausen DQN (Vieillard, Pietquin and Geist 2020): DQN whose targets add the scaled log-policy of the action
taken to the reward and bootstrap from the soft value of the target network's softmax policy. `agent.MunchausenDQNAgent`,
`learner.MunchausenLearner`, `settings.MunchausenSettings`; `AGENT` is its registry entry."""
from hvd_dqn.agent.munchausen.settings import MunchausenSettings
from hvd_dqn.agent.registry import AgentEntry

AGENT = AgentEntry(
    name="mdqn", title="M-DQN",
    summary="Munchausen DQN (Vieillard et al. 2020): DQN's targets plus alpha times the scaled log-policy of the "
            "action taken (--munchausen_scale, --log_policy_clip), bootstrapping from the soft value of the target "
            "network's softmax policy at temperature --entropy_temperature; DQN's replay memory, target network, "
            "loss and network.",
    implementation="hvd_dqn.agent.munchausen.agent:MunchausenDQNAgent",
    settings_class=MunchausenSettings,
    without_them="bootstraps from the soft value of its softmax policy with the Munchausen bonus",
    acts_ahead=True, checks="hvd_dqn.agent.dqn.checks:check_settings",
    shapes_checkpoint=("dueling", "layer_norm", "noisy_nets"))
