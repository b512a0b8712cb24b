"""Recording one episode of a trained agent as an MP4 or GIF of the full-colour screen.

The agent sees 84x84 grayscale stacks, which make a poor film. For Atari games a second AtariVectorEnv
runs beside the agent's, with the same game, settings and seed but colour frames at the native 210x160
size; both receive the same actions, so their emulators (no-op starts and sticky actions included) play
the same game. Every step checks that rewards and episode ends agree, so a divergence cannot go unnoticed.
Classic-control tasks are filmed from gymnasium's rgb_array rendering.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import List

import numpy as np

from hvd_dqn.envs import ATARI_FRAME_SKIP, AtariVectorEnvAdapter, atari_game, atari_settings, env_seeds
from hvd_dqn.logdir.modes import as_if_made_here

VIDEO_FORMATS = (".mp4", ".gif")
ATARI_SCREEN = (210, 160)  # height, width of the ALE screen
ATARI_FRAMES_PER_SECOND = 60  # the console's frame rate


@dataclasses.dataclass
class RecordedEpisode:
    frames: List[np.ndarray]  # (height, width, 3) uint8, one per agent step plus the first
    episode_return: float  # raw game score
    length: int  # agent steps
    frames_per_second: float  # real-time playback


def check_video_path(path: str) -> None:
    """Raises ValueError naming the problem if `path` cannot take a video (checked before a long episode)."""
    extension = os.path.splitext(path)[1].lower()
    if extension not in VIDEO_FORMATS:
        raise ValueError(f"--video={path}: unsupported format {extension or '(none)'}; use one of "
                         f"{', '.join(VIDEO_FORMATS)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--video={path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--video={path}: folder {folder} is not writable")


def record_episode(actor, config, epsilon: float, seed: int) -> RecordedEpisode:
    """Plays one episode of `config.env_id` with `actor` and returns its screen frames."""
    game = atari_game(config.env_id)
    if game is not None:
        return _record_atari(actor, game, config, epsilon, seed)
    return _record_gymnasium(actor, config.env_id, epsilon, seed)


def _record_atari(actor, game: str, config, epsilon: float, seed: int) -> RecordedEpisode:
    settings = atari_settings(config, threads=1)
    agent_env = AtariVectorEnvAdapter(game, 1, settings)
    screen_env = AtariVectorEnvAdapter(game, 1, settings, screen=ATARI_SCREEN)
    seeds = env_seeds(seed, 1)
    observation, _ = agent_env.reset(seed=seeds)
    screen, _ = screen_env.reset(seed=seeds)
    frames = [screen[0, -1]]
    episode_return, length = 0.0, 0
    try:
        while True:
            action = actor.select_actions(observation, epsilon)
            observation, reward, terminated, truncated, _ = agent_env.step(action)
            screen, screen_reward, screen_terminated, screen_truncated, screen_info = screen_env.step(action)
            agent_outcome = (reward[0], terminated[0], truncated[0])
            if agent_outcome != (screen_reward[0], screen_terminated[0], screen_truncated[0]):
                raise RuntimeError(f"the screen emulator diverged from the agent's at step {length + 1}")
            episode_return += float(reward[0])
            length += 1
            done = bool(terminated[0] or truncated[0])
            # At an episode's end SAME_STEP autoreset returns the next episode's first screen; film the last.
            frames.append(screen_info["final_obs"][0, -1] if done else screen[0, -1])
            if done:
                break
    finally:
        agent_env.close()
        screen_env.close()
    return RecordedEpisode(frames, episode_return, length, ATARI_FRAMES_PER_SECOND / ATARI_FRAME_SKIP)


def _record_gymnasium(actor, env_id: str, epsilon: float, seed: int) -> RecordedEpisode:
    import os

    import gymnasium

    # Classic control draws with pygame, whose start-up asks SDL for a video driver even to draw off screen; on a
    # host without a display SDL then writes "error: XDG_RUNTIME_DIR is invalid or not set" to stderr, for a
    # video that is written fine. Off screen its dummy driver is all the drawing needs.
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = gymnasium.make(env_id, render_mode="rgb_array")
    observation, _ = env.reset(seed=env_seeds(seed, 1)[0])
    frames = [env.render()]
    episode_return, length, done = 0.0, 0, False
    while not done:
        action = actor.select_actions(observation[np.newaxis], epsilon)[0]
        observation, reward, terminated, truncated, _ = env.step(action)
        frames.append(env.render())
        episode_return += float(reward)
        length += 1
        done = terminated or truncated
    fps = float(env.metadata.get("render_fps") or 30)
    env.close()
    return RecordedEpisode(frames, episode_return, length, fps)


def write_video(path: str, frames: List[np.ndarray], frames_per_second: float) -> None:
    """Writes `frames` as an MP4 (H.264) or a looping GIF, chosen by the extension. The file appears only
    when complete: it is written beside its final name and then renamed."""
    check_video_path(path)
    extension = os.path.splitext(path)[1].lower()
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(suffix=extension, prefix=".video-", dir=folder)
    os.close(handle)
    try:
        if extension == ".gif":
            from PIL import Image

            images = [Image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in frames]
            # GIF frame durations are in milliseconds (browsers round them to 10 ms).
            images[0].save(temporary, save_all=True, append_images=images[1:], loop=0,
                           duration=round(1000.0 / frames_per_second))
        else:
            import imageio.v2 as imageio

            with imageio.get_writer(temporary, format="FFMPEG", fps=frames_per_second, codec="libx264",
                                    pixelformat="yuv420p", macro_block_size=1) as writer:
                for frame in frames:
                    writer.append_data(_even_sides(np.asarray(frame, dtype=np.uint8)))
        as_if_made_here(temporary)  # mkstemp's 0600 would keep it from a viewer of another user
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _even_sides(frame: np.ndarray) -> np.ndarray:
    """H.264 in yuv420p needs even height and width; an odd side gets its edge row or column repeated."""
    height, width = frame.shape[:2]
    return np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")
