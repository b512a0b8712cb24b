"""DQN (Mnih et al. 2015) with its extensions: `agent.DQNAgent` (replay memory, replay ratio, target network) and `learner.DQNLearner` (the (double) DQN update)."""
