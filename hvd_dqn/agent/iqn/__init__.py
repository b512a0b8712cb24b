"""IQN (Dabney et al. 2018, "Implicit Quantile Networks for Distributional Reinforcement Learning"): DQN's replay
memory and target network, with the return's quantile function learned at sampled quantile levels tau, each embedded
by cosines and merged into the network's features. `network.build_implicit_quantile_network`,
`learner.ImplicitQuantileLearner`, `agent.IQNAgent`; `AGENT` is its registry entry, with its own settings."""
from hvd_dqn.agent.iqn.settings import IQNSettings
from hvd_dqn.agent.registry import AgentEntry

AGENT = AgentEntry(
    name="iqn", title="IQN",
    summary="IQN (Dabney et al. 2018): the return's quantile function at sampled levels tau, embedded by cosines, "
            "learned with the quantile Huber loss (--kappa) and acted on by its mean; DQN's replay memory, target "
            "network and extensions (double, prioritised replay, n-step).",
    implementation="hvd_dqn.agent.iqn.agent:IQNAgent",
    without_them="learns the return's quantile function at sampled levels with the quantile Huber loss (--kappa)",
    settings_class=IQNSettings, acts_ahead=True,
    checks="hvd_dqn.agent.iqn.checks:check_settings",
    shapes_checkpoint=("quantile_embedding_dim",),
    # the standard deviation of the return distribution of the actions taken, mean over the minibatch
    update_metrics=("return_std",), dopamine="IQN")
