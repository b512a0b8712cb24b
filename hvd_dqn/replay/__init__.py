"""Each rank's replay memory: uniform or prioritised (sum tree), whole observations or Atari frames stored
once, and minibatches drawn in the background."""
