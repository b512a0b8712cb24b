"""Each rank's vectorised environment, and how one vector step becomes stored transitions.

Environments use gymnasium's SAME_STEP autoreset: the step on which an episode ends already returns the
first observation of the next episode, and the true last observation goes to info["final_obs"]. The
default NEXT_STEP mode instead returns a step that belongs to no transition, which naive replay code
stores by mistake (see ../shared/TOOLCHAIN.md).
"""
from __future__ import annotations

import dataclasses
from typing import Tuple

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    observation_shape: Tuple[int, ...]
    observation_dtype: np.dtype
    num_actions: int


def env_seeds(seed: int, count: int) -> list:
    """Distinct 32-bit seeds for `count` environments, derived from one rank's seed (seed + rank).

    Deriving them through a SeedSequence keeps env i of rank r and env j of rank r + 1 from sharing a seed
    (which seed + rank + i would do).
    """
    return [int(value) for value in np.random.SeedSequence(seed).generate_state(count)]


def make_vector_env(env_id: str, num_envs: int, vectorization_mode: str = "sync") -> gymnasium.vector.VectorEnv:
    """`num_envs` copies of `env_id` as one vector env with SAME_STEP autoreset; discrete actions only."""
    env = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=vectorization_mode,
                             vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    if not isinstance(env.single_action_space, gymnasium.spaces.Discrete):
        env.close()
        raise ValueError(f"{env_id} has action space {env.single_action_space}; DQN needs a Discrete one")
    if not isinstance(env.single_observation_space, gymnasium.spaces.Box):
        env.close()
        raise ValueError(f"{env_id} has observation space {env.single_observation_space}; a Box is needed")
    return env


def spec_of(env: gymnasium.vector.VectorEnv) -> EnvSpec:
    space = env.single_observation_space
    return EnvSpec(tuple(space.shape), np.dtype(space.dtype), int(env.single_action_space.n))


def true_next_observations(next_observation: np.ndarray, done: np.ndarray, info: dict) -> np.ndarray:
    """s_t for every env: the returned observation, except where an episode just ended, where it is the
    last observation of that episode (info["final_obs"]) rather than the reset observation."""
    if not done.any():
        return next_observation
    result = next_observation.copy()
    ended = np.flatnonzero(info["_final_obs"])
    result[ended] = np.stack(info["final_obs"][ended])
    return result
