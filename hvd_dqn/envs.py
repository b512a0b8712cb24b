"""Each rank's vectorised environment, and how one vector step becomes stored transitions.

Classic-control ids (CartPole-v1, ...) come from gymnasium's registry; Atari games (a plain name such as
`pong` / `Pong`, or `ALE/Pong-v5`) from ale-py's C++ `AtariVectorEnv`, which runs the standard DQN
preprocessing itself (84x84 grayscale, frame skip 4 with max-pool, 4-frame stacks, no-op starts, fire
reset) on its own threads.

Environments use SAME_STEP autoreset: the step on which an episode ends already returns the
first observation of the next episode, and the true last observation goes to info["final_obs"]. The
default NEXT_STEP mode instead returns a step that belongs to no transition, which naive replay code
stores by mistake (gymnasium 1.x's `autoreset_mode` documents both).
"""
from __future__ import annotations

import dataclasses
import pickle
import re
import warnings
from typing import Optional, Tuple

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    observation_shape: Tuple[int, ...]
    observation_dtype: np.dtype
    num_actions: int


def env_seeds(seed: int, count: int, stream: int = 0) -> list:
    """Distinct 32-bit seeds for `count` environments, derived from one rank's seed (seed + rank).

    Deriving them through a SeedSequence keeps env i of rank r and env j of rank r + 1 from sharing a seed
    (which seed + rank + i would do). A non-zero `stream` (a resumed run passes its env steps) gives another
    set, so a resumed run does not replay the episodes its first part began with.
    """
    entropy = [seed, stream] if stream else seed
    return [int(value) for value in np.random.SeedSequence(entropy).generate_state(count)]


@dataclasses.dataclass(frozen=True)
class AtariSettings:
    """The Atari protocol settings (Machado et al. 2018 recommend sticky actions, 0.25, over no-op starts
    alone; Mnih et al. 2015 use up to 30 no-ops, reward clipping and life loss as terminal). Dopamine's
    protocol has sticky actions and neither no-ops nor a FIRE press at reset (its AtariPreprocessing)."""

    repeat_action_probability: float = 0.25
    full_action_space: bool = False
    noop_max: int = 30
    max_episode_frames: int = 108_000  # 30 minutes of play at 60 Hz; a truncation, not a terminal
    threads: int = 0  # emulator threads; 0: one per env, as ale-py chooses
    fire_reset: bool = True  # FIRE at reset in games that need it (Breakout serves the ball only after FIRE)


def atari_game(env_id: str) -> Optional[str]:
    """ale-py's ROM id for an Atari env id (`pong`, `Pong`, `ALE/Pong-v5` -> `pong`), or None."""
    from ale_py.roms import get_all_rom_ids

    match = re.fullmatch(r"ALE/(\w+)-v5", env_id)
    name = match.group(1) if match else env_id
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return snake if snake in get_all_rom_ids() else None


def action_names(env_id: str, num_actions: int, full_action_space: bool = False) -> list:
    """What each action index does: ALE's names for an Atari game (Breakout's minimal set: NOOP, FIRE, RIGHT,
    LEFT, in the order ale-py's envs number them), the indices as text for any other env."""
    game = atari_game(env_id)
    if game is None:
        return [str(action) for action in range(num_actions)]
    import ale_py
    from ale_py.roms import get_rom_path

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.loadROM(get_rom_path(game))
    actions = ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet()
    return [action.name for action in actions]


ATARI_FRAME_SKIP = 4  # Mnih et al. 2015: each action repeated for 4 frames, the last two max-pooled


def frames_per_step(env_id: str) -> int:
    """Emulator frames per agent step: ATARI_FRAME_SKIP for Atari games, 1 otherwise."""
    return ATARI_FRAME_SKIP if atari_game(env_id) is not None else 1


class AtariVectorEnvAdapter:
    """ale-py's AtariVectorEnv with the small differences from gymnasium's vector API smoothed over:
    seeds may be a list; info["_final_obs"] marks the envs whose info["final_obs"] holds a last
    observation (ale-py fills that array for all envs, without gymnasium's mask); and info["life_lost"]
    marks envs that lost a life without ending the episode (from info["lives"], so learning may treat it
    as terminal while episodes and scores stay whole)."""

    def __init__(self, game: str, num_envs: int, settings: AtariSettings, screen: Optional[Tuple[int, int]] = None):
        """`screen=(height, width)` gives colour frames of that size, one per step (for videos), instead of
        the agent's 84x84 grayscale 4-frame stacks; the emulation is the same."""
        from ale_py.vector_env import AtariVectorEnv

        observation_format = dict(img_height=84, img_width=84, grayscale=True, stack_num=4, maxpool=True)
        if screen is not None:
            observation_format = dict(img_height=screen[0], img_width=screen[1], grayscale=False, stack_num=1,
                                      maxpool=False)
        self._env = AtariVectorEnv(
            game, num_envs, num_threads=settings.threads, autoreset_mode="SameStep", frameskip=ATARI_FRAME_SKIP,
            repeat_action_probability=settings.repeat_action_probability,
            full_action_space=settings.full_action_space, noop_max=settings.noop_max,
            use_fire_reset=settings.fire_reset,
            max_num_frames_per_episode=settings.max_episode_frames,
            # Rewards stay raw so reported returns are game scores; the trainer clips for learning.
            reward_clipping=False, episodic_life=False, **observation_format)
        self.num_envs = num_envs
        self.single_observation_space = self._env.single_observation_space
        self.single_action_space = self._env.single_action_space
        self._lives = np.zeros(num_envs, dtype=np.int64)

    def reset(self, seed=None):
        if seed is not None:  # ale-py takes C ints: fold the 32-bit seeds into 31 bits
            seed = np.asarray(seed, dtype=np.int64) % (2**31 - 1)
        observation, info = self._env.reset(seed=seed)
        self._lives = np.asarray(info["lives"], dtype=np.int64).copy()
        return observation, info

    def step(self, actions):
        self.send(actions)
        return self.recv()

    def send(self, actions) -> None:
        """Starts a step: the emulators run it on their own threads, without the GIL, until `recv`."""
        self._env.send(np.asarray(actions))

    def recv(self):
        """Waits for the step `send` started; returns what `step` returns."""
        observation, reward, terminated, truncated, info = self._env.recv()
        lives = np.asarray(info["lives"], dtype=np.int64)
        done = terminated | truncated
        if "final_obs" in info:
            info["_final_obs"] = done
        info["life_lost"] = (lives < self._lives) & ~done
        self._lives = lives.copy()  # after an episode ends, the new episode's lives
        return observation, reward, terminated, truncated, info

    def close(self):
        self._env.close()


MINATAR_PREFIX = "MinAtar/"


class MissingExtraError(ImportError):
    """An optional dependency (an extra of setup.py) is needed for this environment and not installed."""


def register_minatar_envs() -> None:
    """Makes MinAtar's ids (`MinAtar/Breakout-v0` ...; Young & Tian 2019) known to gymnasium. MinAtar is an
    optional extra, GPL-3.0 licensed, imported only here and only for its ids."""
    if any(env_id.startswith(MINATAR_PREFIX) for env_id in gymnasium.envs.registry):
        return
    try:
        import minatar.gym
    except ImportError:
        raise MissingExtraError("MinAtar is not installed; install the extra with: pip install -e '.[minatar]' "
                                "(scripts/setup.sh does)") from None
    minatar.gym.register_envs()


def make_vector_env(env_id: str, num_envs: int, atari: AtariSettings = AtariSettings(),
                    vectorization_mode: str = "sync"):
    """`num_envs` copies of `env_id` as one vector env with SAME_STEP autoreset; discrete actions only."""
    game = atari_game(env_id)
    if game is not None:
        return AtariVectorEnvAdapter(game, num_envs, atari)
    if env_id.startswith(MINATAR_PREFIX):
        # MinAtar's own defaults are its paper's protocol: sticky actions 0.1 and difficulty ramping on.
        register_minatar_envs()
    with warnings.catch_warnings():  # gymnasium calls MinAtar's v0 "out of date"; v0's 6 actions are the paper's
        warnings.filterwarnings("ignore", message=f".*{MINATAR_PREFIX}.* is out of date.*")
        env = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=vectorization_mode,
                                 vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    if not isinstance(env.single_action_space, gymnasium.spaces.Discrete):
        env.close()
        raise ValueError(f"{env_id} has action space {env.single_action_space}; DQN needs a Discrete one")
    if not isinstance(env.single_observation_space, gymnasium.spaces.Box):
        env.close()
        raise ValueError(f"{env_id} has observation space {env.single_observation_space}; a Box is needed")
    return env


def emulator_state(env) -> Optional[bytes]:
    """Every emulator of a vector env with its random generator and time-limit count, as bytes, or None where
    they cannot be saved. gymnasium's Python envs (classic control, MinAtar) pickle whole; with SAME_STEP
    autoreset the vector env itself holds nothing between steps. ale-py's AtariVectorEnv keeps its emulators
    in C++ threads, out of reach."""
    envs = getattr(env, "envs", None)
    if not isinstance(envs, list):
        return None
    try:
        return pickle.dumps(envs, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None


def restore_emulator_state(env, state: bytes) -> None:
    """Puts `emulator_state`'s emulators in place of `env`'s own. A pickle runs code from the file it is read
    from: resume only checkpoints you trust (as with any pickled checkpoint). Raises ValueError if they are
    not the envs this vector env holds."""
    restored = pickle.loads(state)
    if (not isinstance(restored, list) or len(restored) != len(env.envs)
            or any(type(new.unwrapped) is not type(old.unwrapped) for new, old in zip(restored, env.envs))):
        raise ValueError(f"the saved emulators are not this run's {len(env.envs)} envs")
    for old in env.envs:
        old.close()
    env.envs = restored


def steps_outside_python(env_id: str) -> bool:
    """Whether the env's emulators step without holding Python's interpreter lock (ale-py's C++ vector env),
    so that another Python thread can act while the learner's thread works (`--pipeline=auto`)."""
    return atari_game(env_id) is not None


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


def learning_discounts(terminated: np.ndarray, info: dict, terminal_on_life_loss: bool) -> np.ndarray:
    """The discount stored with each env's transition: 0 where the episode terminated (nothing to bootstrap
    from) and, with `terminal_on_life_loss`, where a life was lost; 1 elsewhere, truncations included (the
    time limit is not part of the task, so the target bootstraps from s_t+1)."""
    discount = 1.0 - terminated.astype(np.float32)
    if terminal_on_life_loss and "life_lost" in info:
        discount[info["life_lost"]] = 0.0
    return discount


def make_env_for(config, num_envs: int, ranks_on_host: int = 1):
    """The vector env a TrainConfig describes, with `num_envs` envs, for one of `ranks_on_host` ranks (its
    emulator threads: --env_threads, else --cores_per_rank, else its share of the CPUs its process may use)."""
    from hvd_dqn.cpus import threads_per_rank

    threads = config.env_threads or config.cores_per_rank or threads_per_rank(ranks_on_host)
    return make_vector_env(config.env_id, num_envs, atari_settings(config, min(threads, num_envs)))


def atari_settings(config, threads: int) -> AtariSettings:
    """The Atari protocol settings a TrainConfig describes, on `threads` emulator threads."""
    return AtariSettings(config.repeat_action_probability, config.full_action_space, config.noop_max,
                         config.max_episode_frames, threads, config.fire_reset)


def probe_spec(config) -> EnvSpec:
    """The spec of the env a TrainConfig describes, read from one env on one emulator thread that is closed
    again: what the measurements need to build the preset's networks and replay without running the env."""
    env = make_env_for(config.replace(env_threads=1), 1)
    try:
        return spec_of(env)
    finally:
        env.close()
