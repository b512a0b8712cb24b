"""Per-rank replay memories: uniform or prioritised sampling, one-step or n-step returns.

Each rank owns one memory and samples its own minibatches from it; nothing here is distributed.

Layout. Each of the rank's `num_envs` environments owns one ring segment of `capacity // num_envs`
entries, so an env's steps are consecutive entries and n-step returns never cross into another env's data.
An entry holds one step of one env: action, reward, the step's continuation `discount` (0 where the
learner must not bootstrap: a termination, or a life loss treated as one; 1 otherwise, truncations
included) and `ended` (the episode ended at this step, by termination or truncation). Positions are
absolute entry numbers per env (0, 1, 2, ...); entry p lives in slot p % segment until overwritten.

n-step returns (Sutton & Barto 2018, ch. 7; Hessel et al. 2018) are assembled when a minibatch is drawn:
from entry p, steps p, p+1, ... are summed while the previous step continued (discount 1, episode not
ended), at most `n_step` of them. With k steps taken,

    reward_t   = r_p + gamma r_p+1 + ... + gamma^(k-1) r_p+k-1
    discount_t = gamma^k * discount_p+k-1       (0 if the k-th step terminated)
    observation_t = the observation after step p+k-1 (an episode's true last one after a truncation)

so the learner's target is reward_t + discount_t * max_a Q(observation_t, a). A transition whose n steps
are not all written yet, and whose episode has not ended before, is not sampleable yet.

Prioritised replay (Schaul et al. 2016) keeps one priority per entry in a SumTree over the flat index
env * segment + slot; see PrioritySettings.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple

import numpy as np

from hvd_dqn.memories.saved_arrays import SavedArrays, copy_into
from hvd_dqn.memories.sum_tree import SumTree


@dataclasses.dataclass
class Batch:
    """A minibatch, leading dimension B. Names follow the time index: *_tm1 at the start, *_t at the end."""

    observation_tm1: np.ndarray  # (B, *obs_shape)
    action_tm1: np.ndarray  # (B,) int32
    reward_t: np.ndarray  # (B,) float32: the (n-step) discounted reward
    discount_t: np.ndarray  # (B,) float32: the factor on the bootstrap value, gamma^k or 0
    observation_t: np.ndarray  # (B, *obs_shape)
    weights: Optional[np.ndarray] = None  # (B,) float32 importance-sampling weights (prioritised replay)
    indices: Optional[np.ndarray] = None  # (B,) int64 entries, for update_priorities (prioritised replay)


@dataclasses.dataclass
class FrameBatch:
    """A minibatch of stacked-frame transitions in compact form, as the frame memory samples it: for each
    transition the frames from s_t's oldest to s_t+k's newest once, (B, stack + n_step, H, W) uint8, rather
    than both stacks (2 x stack frames; 5 frames instead of 8 for one-step Atari). The learner rebuilds the
    stacks inside its update, on the device; `observation_tm1` and `observation_t` build them in NumPy."""

    frames: np.ndarray  # (B, stack + n_step, H, W) uint8; zero outside the transition's episode and window
    next_offset: np.ndarray  # (B,) int32: s_t+k = frames[b, next_offset[b] : next_offset[b] + stack] (k steps)
    stack: int
    action_tm1: np.ndarray
    reward_t: np.ndarray
    discount_t: np.ndarray
    weights: Optional[np.ndarray] = None
    indices: Optional[np.ndarray] = None

    @property
    def observation_tm1(self) -> np.ndarray:
        return self.frames[:, :self.stack]

    @property
    def observation_t(self) -> np.ndarray:
        rows = np.arange(len(self.frames))[:, None]
        return self.frames[rows, self.next_offset[:, None] + np.arange(self.stack)[None, :]]


@dataclasses.dataclass(frozen=True)
class PrioritySettings:
    """Proportional prioritisation: entry i is drawn with probability p_i^alpha / sum_j p_j^alpha, where
    p_i = |TD error| + epsilon from its last update and new entries get the largest p seen so far; the loss
    of each drawn transition is weighted by (N P(i))^-beta, normalised by the minibatch's largest weight."""

    alpha: float = 0.6  # Schaul et al. 2016, proportional variant on Atari
    epsilon: float = 1e-6  # keeps every transition drawable


class SegmentedReplay(SavedArrays):
    """The machinery both memories share: per-env segments, sampleability, n-step returns, priorities.
    Subclasses store observations and assemble them (`_write_observations`, `_observations`)."""

    def __init__(self, capacity: int, num_envs: int, gamma: float, n_step: int,
                 priority: Optional[PrioritySettings], min_entries_per_env: int = 1):
        if num_envs <= 0 or capacity < num_envs * max(min_entries_per_env, n_step + 1):
            raise ValueError(f"replay capacity {capacity} is too small for {num_envs} envs "
                             f"(at least {max(min_entries_per_env, n_step + 1)} entries per env)")
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        self.num_envs = num_envs
        self.segment = capacity // num_envs  # entries per env
        self.capacity = self.segment * num_envs
        self.gamma = float(gamma)
        self.n_step = int(n_step)
        shape = (num_envs, self.segment)
        self._actions = np.zeros(shape, dtype=np.uint8)  # discrete actions: at most 18 for Atari
        self._rewards = np.zeros(shape, dtype=np.float32)
        self._discounts = np.zeros(shape, dtype=np.float32)
        self._ended = np.zeros(shape, dtype=bool)
        self._transition = np.zeros(shape, dtype=bool)  # the entry starts a transition
        self._written = np.zeros(num_envs, dtype=np.int64)  # entries ever written per env
        self._env_index = np.arange(num_envs)
        self.priority = priority
        self._tree = SumTree(self.capacity) if priority else None
        self._max_priority = 1.0  # the largest |TD error| + epsilon seen; new entries get it

    def __len__(self) -> int:
        """Entries held (for the frame memory, plus one final-observation entry per ended episode)."""
        return int(np.sum(np.minimum(self._written, self.segment)))

    @property
    def bytes_per_transition(self) -> int:
        """Bytes of storage per entry: the per-entry arrays of state() (the write counters are per env and
        negligible), plus 16-32 for the sum tree with prioritised replay."""
        per_entry = [array for array in self.state().values() if array.shape[:2] == (self.num_envs, self.segment)]
        total = sum(array.nbytes for array in per_entry)
        if self._tree is not None:
            total += self._tree._nodes.nbytes
        return total // self.capacity

    # --- checkpointing ----------------------------------------------------------------------------------
    def state(self) -> Dict[str, np.ndarray]:
        """Everything needed to continue sampling exactly as before: the stored entries, the write
        counters and, when prioritised, the priorities."""
        names = [name for name, value in vars(self).items()
                 if isinstance(value, np.ndarray) and name != "_env_index"]
        state = {name: getattr(self, name) for name in names}
        if self._tree is not None:
            state["_tree_nodes"] = self._tree._nodes
            state["_max_priority"] = np.array(self._max_priority)
        return state

    def load_state(self, state: Dict[str, np.ndarray]) -> None:
        """Restores `state()`; raises ValueError naming the first array whose shape or type differs (a
        memory built with another capacity, env count, observation shape or prioritisation)."""
        self.check_state(state, "written with or without --prioritized_replay unlike this run",
                         "another --replay_capacity, --num_envs or environment?")
        for name, array in state.items():
            if name == "_tree_nodes":
                copy_into(self._tree._nodes, array)
            elif name == "_max_priority":
                self._max_priority = float(np.asarray(array))
            else:
                copy_into(getattr(self, name), array)

    def cut_episodes(self) -> None:
        """Ends every env's unfinished episode here, as a truncation: the envs will go on with new episodes
        (a resumed run resets them, since emulator states are not checkpointed), and their first steps must
        not be joined to the old episodes' last ones in an n-step window or a frame stack."""
        envs = np.flatnonzero(self._written > 0)
        last = (self._written[envs] - 1) % self.segment
        open_episodes = ~self._ended[envs, last]
        self._cut(envs[open_episodes], self._written[envs[open_episodes]] - 1)

    def _cut(self, envs: np.ndarray, positions: np.ndarray) -> None:
        """Marks each env's step at `positions` (its newest) as its episode's last: a truncation, so the
        step keeps its discount and its transition bootstraps from the stored next observation."""
        self._ended[envs, positions % self.segment] = True

    def _write(self, envs, transition, action, reward, discount, ended) -> np.ndarray:
        """Writes one entry for each of `envs`; returns their slots."""
        slots = self._written[envs] % self.segment
        self._transition[envs, slots] = transition
        self._actions[envs, slots] = action
        self._rewards[envs, slots] = reward
        self._discounts[envs, slots] = discount
        self._ended[envs, slots] = ended
        if self._tree is not None:
            # New transitions at the largest priority so far, so each is likely drawn soon after it arrives;
            # entries that start no transition are never drawn.
            priority = self._max_priority ** self.priority.alpha if transition else 0.0
            self._tree.set(envs * self.segment + slots, np.full(len(envs), priority))
        self._written[envs] += 1
        return slots

    # --- sampling --------------------------------------------------------------------------------------
    def sample(self, batch_size: int, rng: np.random.Generator, beta: float = 1.0) -> Batch:
        """Draws `batch_size` sampleable transitions: uniformly (with replacement), or by priority with
        importance-sampling weights for `beta` when the memory is prioritised."""
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
                batch = self.gather(envs, positions)
                if self._tree is not None:
                    batch.indices = envs * self.segment + positions % self.segment
                    batch.weights = self.importance_weights(batch.indices, beta)
                return batch
        raise ValueError("the replay memory holds no sampleable transition yet")

    def _draw(self, count: int, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
        """Candidate (env, absolute position) pairs among the entries held."""
        held = np.minimum(self._written, self.segment)
        if held.sum() == 0:
            raise ValueError("cannot sample from an empty replay memory")
        if self._tree is not None:
            flat = self._tree.sample(count, rng)
            envs, slots = flat // self.segment, flat % self.segment
        else:
            flat = rng.integers(0, held.sum(), size=count)  # uniform over all held entries
            bounds = np.cumsum(held)
            envs = np.searchsorted(bounds, flat, side="right")
            slots = (flat - (bounds[envs] - held[envs]) + self._written[envs] - held[envs]) % self.segment
        oldest = self._written[envs] - held[envs]
        return envs, oldest + (slots - oldest) % self.segment

    def importance_weights(self, indices: np.ndarray, beta: float) -> np.ndarray:
        """(N P(i))^-beta / max over the minibatch, with N the entries held."""
        probabilities = self._tree.get(indices) / self._tree.total
        weights = (len(self) * probabilities) ** -beta
        return (weights / weights.max()).astype(np.float32)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """After an update: priority |TD error| + epsilon for each drawn entry."""
        priorities = np.abs(np.asarray(td_errors, dtype=np.float64)) + self.priority.epsilon
        self._max_priority = max(self._max_priority, float(priorities.max()))
        self._tree.set(indices, priorities ** self.priority.alpha)

    def _n_step_window(self, envs: np.ndarray, positions: np.ndarray):
        """Which of the steps p .. p+n-1 a transition from p includes, and whether they are all written."""
        window = positions[:, None] + np.arange(self.n_step)[None, :]
        written = window < self._written[envs][:, None]
        slots = window % self.segment
        continues = written & (self._discounts[envs[:, None], slots] != 0) & ~self._ended[envs[:, None], slots]
        included = np.ones_like(written)
        included[:, 1:] = np.cumprod(continues[:, :-1], axis=1).astype(bool)
        complete = np.all(~included | written, axis=1)
        return slots, included, complete

    def sampleable(self, envs: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Whether the transition starting at each (env, absolute position) can be drawn; vectorised."""
        oldest = self._written[envs] - self.segment
        _, included, complete = self._n_step_window(envs, positions)
        last = positions + included.sum(axis=1) - 1
        return ((positions >= 0) & (positions >= oldest) & self._transition[envs, positions % self.segment]
                & complete & self._extra_sampleable(envs, positions, last))

    def _extra_sampleable(self, envs, positions, last) -> np.ndarray:
        return np.ones(len(envs), dtype=bool)

    def gather(self, envs: np.ndarray, positions: np.ndarray) -> Batch:
        """The (n-step) transitions starting at (env, absolute position) pairs."""
        slots, included, _ = self._n_step_window(envs, positions)
        steps = included.sum(axis=1)
        rewards = self._rewards[envs[:, None], slots]
        powers = self.gamma ** np.arange(self.n_step)
        reward = np.sum(np.where(included, rewards * powers, 0.0), axis=1)
        last = positions + steps - 1
        discount = self.gamma ** steps * self._discounts[envs, last % self.segment]
        return self._batch(envs, positions, steps, action_tm1=self._actions[envs, positions % self.segment].astype(
            np.int32), reward_t=reward.astype(np.float32), discount_t=discount.astype(np.float32))

    def _batch(self, envs, positions, steps, **fields):
        """The minibatch with the observations of each transition: s at `positions`, and s after `steps` steps."""
        raise NotImplementedError


class ReplayMemory(SegmentedReplay):
    """Replay for vector observations (classic control, MinAtar's grids): each entry stores s_t and s_t+1
    whole. Bool observations (MinAtar's 10x10xC object grids) are bit-packed, 8 cells a byte: 125 bytes
    for Seaquest's 10 channels instead of 1,000 as bools or 4,000 as float32."""

    def __init__(self, capacity: int, num_envs: int, observation_shape: Tuple[int, ...],
                 observation_dtype=np.float32, gamma: float = 0.99, n_step: int = 1,
                 priority: Optional[PrioritySettings] = None):
        super().__init__(capacity, num_envs, gamma, n_step, priority)
        self.observation_shape = tuple(observation_shape)
        self._packed = np.dtype(observation_dtype) == np.bool_
        self._cells = int(np.prod(observation_shape))
        stored = ((self._cells + 7) // 8,) if self._packed else self.observation_shape
        shape = (num_envs, self.segment, *stored)
        dtype = np.uint8 if self._packed else observation_dtype
        self._observations_tm1 = np.zeros(shape, dtype=dtype)
        self._observations_t = np.zeros(shape, dtype=dtype)

    def _store(self, observation: np.ndarray) -> np.ndarray:
        if not self._packed:
            return observation
        return np.packbits(np.asarray(observation, dtype=bool).reshape(len(observation), -1), axis=1)

    def _restore(self, stored: np.ndarray) -> np.ndarray:
        if not self._packed:
            return stored
        cells = np.unpackbits(stored, axis=1, count=self._cells).view(bool)
        return cells.reshape((len(stored),) + self.observation_shape)

    def add(self, observation, action, reward, discount, next_observation, episode_ended) -> None:
        """Stores one step of every env (leading dimension num_envs); next_observation is the true s_t+1
        (the episode's last observation where it ended)."""
        slots = self._write(self._env_index, True, action, reward, discount, episode_ended)
        self._observations_tm1[self._env_index, slots] = self._store(observation)
        self._observations_t[self._env_index, slots] = self._store(next_observation)

    def _batch(self, envs, positions, steps, **fields):
        last = positions + steps - 1
        return Batch(observation_tm1=self._restore(self._observations_tm1[envs, positions % self.segment]),
                     observation_t=self._restore(self._observations_t[envs, last % self.segment]), **fields)
