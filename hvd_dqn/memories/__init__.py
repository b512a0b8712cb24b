"""Each rank's memory: a replay memory for the DQN family (uniform or prioritised on a sum tree, whole
observations or Atari frames stored once, minibatches drawn in the background) or PQN's rollout, and how either
is saved in a checkpoint."""
