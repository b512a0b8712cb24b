import os, sys, time, dataclasses
os.sched_setaffinity(0, [int(sys.argv[2])])
import numpy as np
from hvd_dqn.benchmark_workers import resolved_config
from hvd_dqn.run import distributed
config = resolved_config("configs/minatar.flags", [])
distributed.init_horovod(intra_op_threads=1, inter_op_threads=1, cores_per_rank=0)
import tensorflow as tf
from hvd_dqn.agent.learner import DQNLearner, make_optimizer
from hvd_dqn.agent.networks import q_network_for
from hvd_dqn.agent.policy import EpsilonGreedyActor, act_and_store
from hvd_dqn.envs import env_seeds, make_env_for, spec_of
from hvd_dqn.run.learning_side import make_replay_memory
from hvd_dqn.measure.stages import fill_replay
rng = np.random.default_rng(0)
st = dataclasses.replace(config, env_threads=1)
env = make_env_for(st, 2); spec = spec_of(env)
online, target = q_network_for(config, spec, "online"), q_network_for(config, spec, "target")
actor = EpsilonGreedyActor(online, spec.num_actions, rng)
replay = make_replay_memory(config, spec, num_envs=2, capacity=50000)
obs = env.reset(seed=env_seeds(0, 2))[0]
r2 = make_replay_memory(config, spec, num_envs=1, capacity=50000); fill_replay(r2, spec, 1, rng)
learner = DQNLearner(online, target, make_optimizer(config.learning_rate, config.adam_epsilon, config.max_grad_norm, 1, False, 0), config.double_dqn, config.huber_delta)
eps = float(sys.argv[1])
times = []
for i in range(int(sys.argv[3])):
    t = time.perf_counter()
    obs, _, _ = act_and_store(env, actor, replay, obs, eps, config.clip_rewards, config.terminal_on_life_loss)
    for _ in range(2):
        b = r2.sample(32, rng, 0.4); learner.update(b)
    times.append(time.perf_counter() - t)
t = np.array(times[500:]) * 1000
pairs = np.maximum(rng.choice(t, 200000), rng.choice(t, 200000))
print(f"core {sys.argv[2]} eps {eps}: per iteration (2 env steps, 2 updates) mean {t.mean():.3f} ms, median {np.median(t):.3f}, std {t.std():.3f}, p99 {np.percentile(t,99):.3f}, E[max of 2] {pairs.mean():.3f} (+{pairs.mean()-t.mean():.3f})")
