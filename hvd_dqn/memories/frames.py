"""Per-rank replay memory for stacked-frame (Atari) observations that stores every frame once.

An Atari observation is a stack of the last `stack` frames (4 x 84 x 84 uint8). Consecutive observations
share all but one frame, so storing each observation (or s_t and s_t+1 both) would cost 4-8x the memory.
As in Dopamine's circular replay buffer, only the newest frame of each observation is stored: about
7.1 KB per transition instead of 28-56 KB, so a million transitions per rank fit in about 7.1 GB. A
minibatch gathers each transition's frames once, from s_t's oldest to s_t+k's newest (a FrameBatch), and
the learner cuts the two stacks from them inside its update.

Layout. Each of the rank's `num_envs` environments owns one ring segment of `capacity // num_envs`
entries, so the envs' interleaved steps never mix; an entry is

    frame       the newest frame of s_t
    action, reward, discount, ended    of the step s_t -> s_t+1 (see hvd_dqn/memories/replay.py)
    first       s_t is an episode's first observation; older stack slots are zero (AtariVectorEnv
                pads a fresh episode's stack with zero frames)
    transition  the entry starts a transition (false for an episode's final-observation entry)

The next entry of the same env holds s_t+1's newest frame. When an episode ends, the true last observation
(info["final_obs"]: needed to bootstrap after a truncation) is written as one extra entry that starts no
transition, and the next episode begins after it. Truncated episodes therefore bootstrap from their real
last frames and no stack ever mixes two episodes or two envs.

An entry i of env e can be sampled when it starts a transition, its n-step window is written (see
replay.py) and so is the entry after the window's last step (whose frame completes the final stack), and
every frame its stacks use is still in the ring (not yet overwritten by the wrap-around). Sampling,
n-step returns and priorities are SegmentedReplay's; this class stores the frames and gathers them.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from hvd_dqn.memories.replay import FrameBatch, PrioritySettings, SegmentedReplay


class FrameReplayMemory(SegmentedReplay):
    """Replay over the newest transitions of `num_envs` environments, frames stored once."""

    def __init__(self, capacity: int, num_envs: int, frame_shape: Tuple[int, int] = (84, 84), stack: int = 4,
                 gamma: float = 0.99, n_step: int = 1, priority: Optional[PrioritySettings] = None):
        super().__init__(capacity, num_envs, gamma, n_step, priority, min_entries_per_env=stack + n_step + 1)
        self.stack = stack
        shape = (num_envs, self.segment)
        self._frames = np.zeros(shape + tuple(frame_shape), dtype=np.uint8)
        self._first = np.zeros(shape, dtype=bool)
        self._episode_starts = np.ones(num_envs, dtype=bool)  # the next observation begins an episode

    def add(self, observation, action, reward, discount, next_observation, episode_ended) -> None:
        """Stores one step of every env: observation (E, stack, H, W) uint8 is s_t; next_observation is
        s_t+1, the true last observation where `episode_ended` (terminated or truncated); discount is 0
        where the learner must not bootstrap (a termination, or a life loss treated as one)."""
        episode_ended = np.asarray(episode_ended, dtype=bool)
        first = self._episode_starts.copy()
        slots = self._write(self._env_index, True, action, reward, discount, episode_ended)
        self._frames[self._env_index, slots] = observation[:, -1]
        self._first[self._env_index, slots] = first
        ended = np.flatnonzero(episode_ended)
        if len(ended):
            # The episode's last observation: one more frame, starting no transition.
            slots = self._write(ended, False, 0, 0.0, 0.0, True)
            self._frames[ended, slots] = next_observation[ended, -1]
            self._first[ended, slots] = False
        self._episode_starts = episode_ended.copy()

    def _cut(self, envs, positions) -> None:
        """The newest entry holds s_t's frame, but s_t+1's frame would only arrive with the next step, which
        will belong to a new episode. So the entry becomes the episode's final-observation entry (it starts
        no transition) and the step before it, whose s_t+1 that frame completes, ends the episode as a
        truncation; the next stored frame begins a new episode. One transition per env is lost."""
        slots = positions % self.segment
        self._transition[envs, slots] = False
        self._ended[envs, slots] = True
        if self._tree is not None:
            self._tree.set(envs * self.segment + slots, np.zeros(len(envs)))
        # The step before, if it is of the same episode (the newest entry is not the episode's first) and
        # still held.
        earlier = ~self._first[envs, slots] & (positions >= 1) & (positions - 1 >= self._written[envs] - self.segment)
        self._ended[envs[earlier], (positions[earlier] - 1) % self.segment] = True
        self._episode_starts[:] = True

    def _extra_sampleable(self, envs, positions, last) -> np.ndarray:
        oldest = self._written[envs] - self.segment
        successor_written = last + 1 < self._written[envs]
        earliest_used = np.maximum(positions - (self.stack - 1), self._latest_first(envs, positions))
        return successor_written & (earliest_used >= oldest)

    def _latest_first(self, envs, positions) -> np.ndarray:
        """The newest episode-start entry among positions-(stack-1) .. positions, or a very small number."""
        offsets = np.arange(-(self.stack - 1), 1)  # oldest .. newest stack slot
        window = positions[:, None] + offsets[None, :]
        is_first = self._first[envs[:, None], window % self.segment] & (window >= 0)
        return np.where(is_first, window, np.iinfo(np.int64).min // 2).max(axis=1)

    def _batch(self, envs, positions, steps, **fields) -> FrameBatch:
        """One gather of the frames from s_t's oldest to s_t+k's newest, (B, stack + n_step, H, W): s_t's
        stack and s_t+k's overlap in all but k frames, so they are not gathered apart. Frames before the
        episode's first (another episode's) and after s_t+k's newest (a shorter n-step window) are zero."""
        window = positions[:, None] + np.arange(-(self.stack - 1), self.n_step + 1)[None, :]
        frames = self._frames[envs[:, None], window % self.segment]
        outside = (window < self._latest_first(envs, positions)[:, None]) | (window > (positions + steps)[:, None])
        frames[outside] = 0
        return FrameBatch(frames=frames, next_offset=steps.astype(np.int32), stack=self.stack, **fields)
