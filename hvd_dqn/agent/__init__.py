"""The DQN algorithm on one process: Q-networks, the learner (TD targets, losses, the data-parallel update),
the epsilon-greedy policy, schedules, episodes played by a policy, and the greedy policy as a SavedModel."""
