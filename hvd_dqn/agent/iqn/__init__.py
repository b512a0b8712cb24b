"""IQN (Dabney et al. 2018, "Implicit Quantile Networks for Distributional Reinforcement Learning"): DQN's replay
memory and target network, with the return's quantile function learned at sampled quantile levels tau, each embedded
by cosines and merged into the network's features. `network.build_implicit_quantile_network`,
`learner.ImplicitQuantileLearner`, `agent.IQNAgent`; `AGENT` is its registry entry, with its own settings."""
from hvd_dqn.agent.dqn import REPLAY_SETTINGS, TARGET_SETTINGS
from hvd_dqn.agent.registry import AgentEntry

TAU_SETTINGS = {
    "num_tau_samples": "IQN's quantile levels per transition", "num_tau_prime_samples": "IQN's target samples",
    "num_quantile_samples": "IQN's quantile levels for choosing actions",
    "quantile_embedding_dim": "IQN's cosine embedding",
}

AGENT = AgentEntry(
    name="iqn", title="IQN",
    summary="IQN (Dabney et al. 2018): the return's quantile function at sampled levels tau, embedded by cosines, "
            "learned with the quantile Huber loss (--kappa) and acted on by its mean; DQN's replay memory, target "
            "network and extensions (double, prioritised replay, n-step).",
    implementation="hvd_dqn.agent.iqn.agent:IQNAgent",
    settings={**REPLAY_SETTINGS, **TARGET_SETTINGS, **TAU_SETTINGS, "kappa": "the quantile Huber loss"},
    without_them="learns the return's quantile function at sampled levels with the quantile Huber loss (--kappa)",
    memory="replay", acts_ahead=True,
    checks="hvd_dqn.agent.iqn.checks:check_settings",
    setting_help={
        "num_tau_samples": "IQN: quantile levels tau sampled per transition for the online network (N; "
                           "Dabney et al. 2018 and Dopamine: 64).",
        "num_tau_prime_samples": "IQN: quantile levels tau' sampled per transition for the target network's "
                                 "samples of the target distribution (N'; Dopamine: 64).",
        "num_quantile_samples": "IQN: quantile levels whose mean values choose the target's greedy action (K, "
                                "sampled; Dopamine: 32); acting and the exported policy take the mean at K evenly "
                                "spaced levels instead.",
        "quantile_embedding_dim": "IQN: cosines cos(pi i tau), i = 1..n, that embed each tau before a ReLU layer "
                                  "as wide as the torso's features (n; Dopamine: 64).",
    },
    shapes_checkpoint=("quantile_embedding_dim",),
    # the standard deviation of the return distribution of the actions taken, mean over the minibatch
    update_metrics=("return_std",))
