"""PQN (Gallici et al. 2024): `agent.PQNAgent` (rollout, epochs of minibatches) and `learner.PQNLearner` (Q(lambda)
returns, the update without a target network). `AGENT` is its registry entry."""
from hvd_dqn.agent.pqn.settings import PQNSettings
from hvd_dqn.agent.registry import AgentEntry

AGENT = AgentEntry(
    name="pqn", title="PQN",
    summary="PQN (Gallici et al. 2024): Q(lambda) on rollouts of vectorised envs, no replay memory and no target "
            "network (use it with --layer_norm).",
    implementation="hvd_dqn.agent.pqn.agent:PQNAgent",
    without_them="learns from each rollout without a replay memory or target network",
    settings_class=PQNSettings, acts_ahead=False,
    checks="hvd_dqn.agent.pqn.checks:check_settings", shapes_checkpoint=("dueling", "layer_norm", "rollout_steps"))
