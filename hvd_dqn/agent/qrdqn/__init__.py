"""QR-DQN (Dabney et al. 2017, "Distributional Reinforcement Learning with Quantile Regression"): DQN's replay
memory and target network, with each action's return learned as --num_quantiles quantiles under the quantile Huber
loss. `agent.QRDQNAgent`, `learner.QuantileLearner`; `AGENT` is its registry entry, with its own settings."""
from hvd_dqn.agent.qrdqn.settings import QRDQNSettings
from hvd_dqn.agent.registry import AgentEntry

AGENT = AgentEntry(
    name="qrdqn", title="QR-DQN",
    summary="QR-DQN (Dabney et al. 2017): --num_quantiles quantiles of the return per action, learned with the "
            "quantile Huber loss (--kappa) and acted on by their mean; DQN's replay memory, target network and "
            "extensions (double, dueling, prioritised replay, n-step).",
    implementation="hvd_dqn.agent.qrdqn.agent:QRDQNAgent",
    without_them="learns quantiles of the return with the quantile Huber loss (--kappa)",
    settings_class=QRDQNSettings, acts_ahead=True,
    checks="hvd_dqn.agent.qrdqn.checks:check_settings",
    shapes_checkpoint=("num_quantiles", "dueling", "noisy_nets"),
    # the standard deviation of the return distribution of the actions taken, mean over the minibatch
    update_metrics=("return_std",), dopamine="QR-DQN")
