"""Run by tests/agent/test_agent_interface.py (alone, or under horovodrun): the trainer driven by a fake agent that
implements only `hvd_dqn.agent.interface.Agent`, on CartPole. The fake records every call the trainer makes and
writes them, rank by rank, to <out>/rank<R>.json, so the test can check what the trainer asked of it.

    python tests/mp/fake_agent_run.py --out=DIR --logdir=DIR [--resume] [--total_env_steps=N]
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from hvd_dqn.agent.policy import EpsilonGreedyActor  # noqa: E402
from hvd_dqn.agent.schedules import LinearSchedule  # noqa: E402
from hvd_dqn.agent.configs import make_config, validate  # noqa: E402
from hvd_dqn.run import trainer as trainer_module  # noqa: E402

UPDATE_EVERY = 10  # the fake's "update" is due every this many of its rank's env steps


class FakeMemory:
    capacity = 0
    bytes_per_transition = 0

    def __init__(self):
        self.transitions = 0

    def __len__(self):
        return self.transitions


class FakeAgent:
    """Learns nothing: each 'update' adds 1 to a variable that every rank keeps equal (an allreduce of ones),
    so the checkpoint, the broadcast and the resume have something to carry."""

    memory_name = "fake memory"
    iterations_per_cycle = 1

    def __init__(self, spec, num_envs, sample_rng):
        self.spec, self.num_envs, self.sample_rng = spec, num_envs, sample_rng
        self.online = tf.keras.Sequential([tf.keras.Input(spec.observation_shape), tf.keras.layers.Dense(
            spec.num_actions, kernel_initializer="zeros", name="q")])
        self.q_network = self.online  # one Q-value per action already
        self.optimizer = None
        self.memory = FakeMemory()
        self.updates_made = tf.Variable(0, dtype=tf.int64, name="updates_made")
        self.calls = {"join_world": [], "store": 0, "learn_env_steps": [], "load_rank_state": [], "closed": False}
        self.own_steps = 0  # this rank's env steps not yet turned into an update (its rank state)

    # the interface
    def make_actor(self, rng, own_network):
        assert not own_network, "CartPole acts in order"
        return EpsilonGreedyActor(self.online, self.spec.num_actions, rng)

    def join_world(self, world_size):
        self.calls["join_world"].append(world_size)

    def store(self, experience):
        self.calls["store"] += 1
        self.memory.transitions += len(experience.action)
        _, reward, terminated, truncated, _ = experience.step_result
        return reward, terminated | truncated

    def learn(self, env_steps, counters):
        import horovod.tensorflow as hvd

        self.calls["learn_env_steps"].append(env_steps)
        self.own_steps += self.num_envs
        while self.own_steps >= UPDATE_EVERY:  # the same count on every rank: all step the same envs
            self.own_steps -= UPDATE_EVERY
            self.updates_made.assign_add(tf.cast(hvd.allreduce(tf.constant(1.0), op=hvd.Average), tf.int64))
            counters.updates += 1

    def iterations_per_update(self, num_envs):
        return UPDATE_EVERY / num_envs

    @property
    def synchronized_variables(self):
        return list(self.online.variables) + [self.updates_made]

    def checkpoint_items(self):
        return {"online": self.online, "num_updates": self.updates_made}

    def rank_state(self):
        return {"fake_own_steps": self.own_steps}

    def load_rank_state(self, state):
        self.calls["load_rank_state"].append(state and state.get("fake_own_steps"))
        self.own_steps = state["fake_own_steps"] if state else 0

    def current_learning_rate(self):
        return 0.5

    def epsilon_schedule(self):
        return LinearSchedule(1.0, 0.05, 1_000)

    def on_world_change(self, world_size):
        return False

    def close(self):
        self.calls["closed"] = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--total_env_steps", type=int, default=400)
    args = parser.parse_args()
    made = []

    def make_fake_agent(config, spec, num_envs, replay_capacity, world_size, sample_rng, rank_metrics):
        made.append(FakeAgent(spec, num_envs, sample_rng))
        return made[-1]

    trainer_module.make_agent = make_fake_agent  # the trainer's one way to an agent
    config = validate(make_config(env_id="CartPole-v1", num_envs=4, total_env_steps=args.total_env_steps,
                                  log_interval_env_steps=100, checkpoint_interval_env_steps=200,
                                  eval_interval_env_steps=200, eval_episodes=2, checkpoint_replay=False,
                                  logdir=args.logdir, resume=args.resume, pipeline="off"))
    trainer = trainer_module.Trainer(config)
    counters = trainer.run()
    agent = made[0]
    report = dict(agent.calls, updates_made=int(agent.updates_made.numpy()), counter_updates=counters.updates,
                  env_steps=counters.env_steps, rank=trainer.world.rank, size=trainer.world.size,
                  weights=[float(np.sum(variable.numpy())) for variable in agent.online.variables])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{trainer.world.rank}.json"), "w") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    main()
