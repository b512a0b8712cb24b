"""PQN (Gallici et al. 2024): `agent.PQNAgent` (rollout, epochs of minibatches) and `learner.PQNLearner` (Q(lambda) returns, the update without a target network)."""
