"""A rank's acting: its emulators, the policy that steps them, and the exploration schedule.

Acting produces `Experience`, one step of every env of the rank; the agent (`hvd_dqn.agent.interface.Agent`)
stores it and learns from it. The two meet in the trainer's loop, in order, or through `hvd_dqn.run.pipeline`,
where acting runs ahead on a thread of its own.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from hvd_dqn.agent.interface import Experience
from hvd_dqn.agent.policy import EpsilonGreedyActor
from hvd_dqn.agent.schedules import LinearSchedule
from hvd_dqn.envs import emulator_state, env_seeds, restore_emulator_state


class Acting:
    """A rank's envs and the epsilon-greedy policy that steps them. `act(env_steps)` takes one step of every
    env; `env_steps` (the job's, before the step) decides epsilon, so the same step explores alike whether
    acting runs in order or ahead of learning. With Ape-X exploration every env keeps a fixed epsilon of its own.

    The actor's network is the learner's online network itself when acting runs in order; the pipeline gives
    acting a copy of its own, since its thread must not read weights while the learner writes them.
    """

    def __init__(self, env, actor: EpsilonGreedyActor, epsilon: LinearSchedule,
                 env_epsilons: Optional[np.ndarray] = None):
        self.env = env
        self.actor = actor
        self.epsilon_schedule = epsilon
        self.env_epsilons = env_epsilons
        self.observation = None  # the envs' current observations; None until the first reset

    @property
    def num_envs(self) -> int:
        return self.env.num_envs

    def epsilon(self, env_steps: int):
        """Epsilon for the step that starts after `env_steps` of the job: one value, or one per env (Ape-X)."""
        return self.epsilon_schedule(env_steps) if self.env_epsilons is None else self.env_epsilons

    def reset(self, seed: int, stream: int) -> None:
        """New episodes in every env, seeded from the rank's seed and `stream` (the job's env steps: a
        resumed run starts its episodes from seeds of their own)."""
        self.observation, _ = self.env.reset(seed=env_seeds(seed, self.num_envs, stream=stream))

    def state(self) -> Optional[Dict[str, np.ndarray]]:
        """What lets a resumed run go on with the episodes under way: the emulators (with their random
        generators and time-limit counts) and their current observations. None where the emulators cannot be
        saved (Atari's C++ vector env): a resumed run then starts new episodes."""
        emulators = emulator_state(self.env) if self.observation is not None else None
        if emulators is None:
            return None
        return {"emulators": np.frombuffer(emulators, dtype=np.uint8), "observation": np.array(self.observation)}

    def load_state(self, state: Dict[str, np.ndarray]) -> None:
        """Takes back `state()`; raises ValueError if it holds other envs than this rank's."""
        if state["observation"].shape[0] != self.num_envs:
            raise ValueError(f"the saved observations are of {state['observation'].shape[0]} envs, not {self.num_envs}")
        restore_emulator_state(self.env, state["emulators"].tobytes())
        self.observation = state["observation"]

    def act(self, env_steps: int, copy: bool = False) -> Experience:
        """One step of every env. `copy`: the observations are copied out of the env's buffers, which an
        emulator may reuse on its next step; needed where the step is stored after the envs step again
        (the pipeline), not where it is stored at once."""
        action = self.actor.select_actions(self.observation, self.epsilon(env_steps))
        step_result = self.env.step(action)
        if copy:
            step_result = (np.array(step_result[0]),) + tuple(step_result[1:])
        return self._advance(action, step_result)

    def _advance(self, action: np.ndarray, step_result: tuple) -> Experience:
        experience = Experience(self.observation, action, step_result)
        self.observation = step_result[0]
        return experience

    def close(self) -> None:
        self.env.close()

