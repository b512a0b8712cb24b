"""Per-rank replay memory for stacked-frame (Atari) observations that stores every frame once.

An Atari observation is a stack of the last `stack` frames (4 x 84 x 84 uint8). Consecutive observations
share all but one frame, so storing each observation (or s_t and s_t+1 both) would cost 4-8x the memory.
As in Dopamine's circular replay buffer, only the newest frame of each observation is stored, and the
stacks for s_t and s_t+1 are rebuilt, vectorised, when a minibatch is sampled: about 7.1 KB per
transition instead of 28-56 KB, so a million transitions per rank fit in about 7.1 GB.

Layout. Each of the rank's `num_envs` environments owns one ring segment of `capacity // num_envs`
entries, so the envs' interleaved steps never mix; an entry is

    frame       the newest frame of s_t
    action, reward, discount    of the transition s_t -> s_t+1 (discount 0 at learning terminals)
    first       s_t is an episode's first observation; older stack slots are zero (AtariVectorEnv
                pads a fresh episode's stack with zero frames)
    transition  the entry starts a transition (false for an episode's final-observation entry)

The next entry of the same env holds s_t+1's newest frame. When an episode ends, the true last observation
(info["final_obs"]: needed to bootstrap after a truncation) is written as one extra entry that starts no
transition, and the next episode begins after it. Truncated episodes therefore bootstrap from their real
last frames and no stack ever mixes two episodes or two envs.

An entry i of env e can be sampled when it starts a transition, its successor i+1 has been written, and
every frame its stacks use is still in the ring (not yet overwritten by the wrap-around).
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from hvd_dqn.replay import Batch


class FrameReplayMemory:
    """Uniform replay over the newest transitions of `num_envs` environments, frames stored once."""

    def __init__(self, capacity: int, num_envs: int, frame_shape: Tuple[int, int] = (84, 84), stack: int = 4):
        if num_envs <= 0 or capacity < num_envs * (stack + 2):
            raise ValueError(f"capacity {capacity} is too small for {num_envs} envs of {stack}-frame stacks")
        self.num_envs = num_envs
        self.stack = stack
        self.segment = capacity // num_envs  # entries per env
        self.capacity = self.segment * num_envs
        shape = (num_envs, self.segment)
        self._frames = np.zeros(shape + tuple(frame_shape), dtype=np.uint8)
        self._actions = np.zeros(shape, dtype=np.uint8)  # Atari has at most 18 actions
        self._rewards = np.zeros(shape, dtype=np.float32)
        self._discounts = np.zeros(shape, dtype=np.float32)
        self._first = np.zeros(shape, dtype=bool)
        self._transition = np.zeros(shape, dtype=bool)
        self._written = np.zeros(num_envs, dtype=np.int64)  # entries ever written per env (monotonic)
        self._episode_starts = np.ones(num_envs, dtype=bool)  # the next observation begins an episode
        self._env_index = np.arange(num_envs)

    def __len__(self) -> int:
        """Entries held: one per stored transition, plus one final-observation entry per ended episode."""
        held = np.minimum(self._written, self.segment)
        return int(np.sum(held))

    @property
    def bytes_per_transition(self) -> int:
        arrays = (self._frames, self._actions, self._rewards, self._discounts, self._first, self._transition)
        return sum(array.nbytes for array in arrays) // self.capacity

    def add(self, observation, action, reward, discount, next_observation, episode_ended) -> None:
        """Stores one step of every env: observation (E, stack, H, W) uint8 is s_t; next_observation is
        s_t+1, the true last observation where `episode_ended` (terminated or truncated); discount is 0
        where the learner must not bootstrap (a termination, or a life loss treated as one)."""
        episode_ended = np.asarray(episode_ended, dtype=bool)
        self._write(self._env_index, observation[:, -1], self._episode_starts.copy(), True,
                    action, reward, discount)
        ended = np.flatnonzero(episode_ended)
        if len(ended):
            # The episode's last observation: one more frame, starting no transition.
            self._write(ended, next_observation[ended, -1], False, False, 0, 0.0, 0.0)
        self._episode_starts = episode_ended.copy()

    def _write(self, envs, frames, first, transition, action, reward, discount) -> None:
        slots = self._written[envs] % self.segment
        self._frames[envs, slots] = frames
        self._first[envs, slots] = first
        self._transition[envs, slots] = transition
        self._actions[envs, slots] = action
        self._rewards[envs, slots] = reward
        self._discounts[envs, slots] = discount
        self._written[envs] += 1

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """Draws `batch_size` sampleable transitions uniformly (with replacement) and stacks their frames."""
        envs = np.empty(batch_size, dtype=np.int64)
        positions = np.empty(batch_size, dtype=np.int64)
        missing = np.arange(batch_size)
        for _ in range(1000):  # rejection rounds, each vectorised; a few per cent are redrawn
            candidate_envs, candidate_positions = self._draw(len(missing), rng)
            good = self.sampleable(candidate_envs, candidate_positions)
            envs[missing[good]] = candidate_envs[good]
            positions[missing[good]] = candidate_positions[good]
            missing = missing[~good]
            if not len(missing):
                return self.gather(envs, positions)
        raise ValueError("the replay memory holds no sampleable transition yet")

    def _draw(self, count: int, rng: np.random.Generator):
        """Candidate (env, position) pairs, uniform over the entries each env still holds."""
        held = np.minimum(self._written, self.segment)
        if held.sum() == 0:
            raise ValueError("cannot sample from an empty replay memory")
        # Uniform over all held entries: pick an entry number, then find its env.
        flat = rng.integers(0, held.sum(), size=count)
        bounds = np.cumsum(held)
        envs = np.searchsorted(bounds, flat, side="right")
        offset = flat - (bounds[envs] - held[envs])
        positions = self._written[envs] - held[envs] + offset  # absolute entry numbers
        return envs, positions

    def sampleable(self, envs: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Whether entry `positions` (absolute entry numbers) of `envs` can be sampled; vectorised."""
        oldest = self._written[envs] - self.segment  # entries before this one are overwritten
        successor_written = positions + 1 < self._written[envs]
        starts = self._transition[envs, positions % self.segment] & successor_written
        earliest_used = np.maximum(positions - (self.stack - 1), self._latest_first(envs, positions))
        return starts & (earliest_used >= oldest) & (positions >= 0)

    def _latest_first(self, envs, positions) -> np.ndarray:
        """The newest episode-start entry among positions-(stack-1) .. positions, or -inf (very small)."""
        offsets = np.arange(-(self.stack - 1), 1)  # oldest .. newest stack slot
        window = positions[:, None] + offsets[None, :]
        is_first = self._first[envs[:, None], window % self.segment] & (window >= 0)
        newest_first = np.where(is_first, window, np.iinfo(np.int64).min // 2).max(axis=1)
        return newest_first

    def gather(self, envs: np.ndarray, positions: np.ndarray) -> Batch:
        """The transitions at (env, absolute entry number) pairs, with s_t and s_t+1 stacked."""
        latest_first = self._latest_first(envs, positions)
        offsets = np.arange(-(self.stack - 1), 2)  # the stack of s_t, plus s_t+1's newest frame
        window = positions[:, None] + offsets[None, :]
        frames = self._frames[envs[:, None], window % self.segment]  # (B, stack + 1, H, W)
        # Zero the frames from before the episode's start (and so from other episodes).
        frames[window < latest_first[:, None]] = 0
        slots = positions % self.segment
        return Batch(
            observation_tm1=frames[:, :-1],
            action_tm1=self._actions[envs, slots].astype(np.int32),
            reward_t=self._rewards[envs, slots],
            discount_t=self._discounts[envs, slots],
            observation_t=frames[:, 1:],
        )
