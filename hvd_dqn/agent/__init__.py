"""The agents and what they are made of: the interface the trainer knows them by (`interface`), the factory that
builds the one a config names (`factory`), DQN (`dqn/`: replay memory, target network, replay ratio) and PQN
(`pqn/`: rollout, Q(lambda) returns, epochs of minibatches), the distributed update both make
(`data_parallel_update`), and their parts: Q-networks, optimizers, the epsilon-greedy policy, schedules, episodes
played by a policy, and the greedy policy as a SavedModel."""
