"""DQN (Mnih et al. 2015) with its extensions: `agent.DQNAgent` (replay memory, replay ratio, target network) and
`learner.DQNLearner` (the (double) DQN update). `AGENT` is its registry entry; `settings` declares the settings of the
replay memory, the target network and the Q-network that the agents of the family compose."""
from hvd_dqn.agent.dqn.settings import DQNSettings
from hvd_dqn.agent.registry import AgentEntry

AGENT = AgentEntry(
    name="dqn", title="DQN",
    summary="DQN (Mnih et al. 2015) with a replay memory and a target network; double, dueling, prioritised "
            "replay and n-step returns as flags.",
    implementation="hvd_dqn.agent.dqn.agent:DQNAgent",
    settings_class=DQNSettings,
    without_them="learns one Q-value per action",
    acts_ahead=True, checks="hvd_dqn.agent.dqn.checks:check_settings",
    shapes_checkpoint=("dueling", "layer_norm", "noisy_nets"), dopamine="DQN")
