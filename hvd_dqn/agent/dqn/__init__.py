"""DQN (Mnih et al. 2015) with its extensions: `agent.DQNAgent` (replay memory, replay ratio, target network) and
`learner.DQNLearner` (the (double) DQN update). `AGENT` is its registry entry; the settings of the replay memory and
the target network are declared here, for every agent that learns from a replay memory."""
from hvd_dqn.agent.dqn.settings import DQNSettings
from hvd_dqn.agent.registry import AgentEntry

# What the agents that learn from a replay memory read of it, and what each setting is for.
REPLAY_SETTINGS = {
    "replay_capacity": "the replay memory", "learning_starts": "the replay memory",
    "batch_size": "the replay memory's minibatches (PQN's are a --num_minibatches-th of each rollout)",
    "train_frequency": "the replay ratio (PQN learns from each rollout once it is collected)",
    "prioritized_replay": "the replay memory", "priority_alpha": "prioritised replay",
    "priority_beta_start": "prioritised replay", "priority_beta_end": "prioritised replay",
    "priority_epsilon": "prioritised replay",
    "n_step": "the replay memory's n-step returns (PQN's returns are Q(lambda), --q_lambda)",
    "apex_exploration": "Ape-X's per-env epsilons",
    "rank_scaling": "how ranks share DQN's updates (PQN's ranks share minibatches by --pqn_minibatches)",
}
# ... and of the target network.
TARGET_SETTINGS = {
    "target_update_period": "the target network", "target_update_tau": "the target network",
    "double_dqn": "the target network",
}
# The TD loss on one Q-value per action, which the distributional agents replace by a loss on distributions.
TD_LOSS_SETTINGS = {"loss": "the TD loss on Q-values", "huber_delta": "the TD loss on Q-values"}
# The Q-network's shape: dueling heads and LayerNorm.
NETWORK_SETTINGS = {"dueling": "the Q-network's heads", "layer_norm": "the Q-network's hidden layers"}
AGENT = AgentEntry(
    name="dqn", title="DQN",
    summary="DQN (Mnih et al. 2015) with a replay memory and a target network; double, dueling, prioritised "
            "replay and n-step returns as flags.",
    implementation="hvd_dqn.agent.dqn.agent:DQNAgent",
    settings={**REPLAY_SETTINGS, **TARGET_SETTINGS, **TD_LOSS_SETTINGS, **NETWORK_SETTINGS}, settings_class=DQNSettings,
    without_them="learns one Q-value per action",
    acts_ahead=True, checks="hvd_dqn.agent.dqn.checks:check_settings",
    shapes_checkpoint=("dueling", "layer_norm", "noisy_nets"))
