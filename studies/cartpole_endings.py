"""Why a CartPole policy's episodes end: plays a checkpoint's greedy policy and reports, per episode, the
return and what ended it (the cart left the track, |x| > 2.4; the pole fell, |theta| > 12 degrees; or the
500-step time limit), with the cart's position and the pole's angle at the end.

    .venv/bin/python studies/cartpole_endings.py runs/x/checkpoints/ckpt-000000050000 [more checkpoints] \
        [--episodes=10] [--seed=1000]

Written to diagnose the plateaus of results/cartpole_preset_search/ (diag_L1): a policy that balances the pole
but lets the cart drift off the track returns 150-250 for tens of thousands of env steps.
"""
import argparse
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

X_LIMIT = 2.4  # gymnasium's CartPole-v1 x_threshold
THETA_LIMIT = 12 * 2 * math.pi / 360  # gymnasium's theta_threshold_radians


def ending(terminated: bool, x: float, theta: float) -> str:
    if not terminated:
        return "time limit"
    return "cart off the track" if abs(x) > X_LIMIT else "pole fell" if abs(theta) > THETA_LIMIT else "terminated"


def play(checkpoint_path: str, episodes: int, seed: int):
    """[(return, ending, x, theta), ...] of greedy episodes of the checkpoint's online network."""
    import gymnasium as gym
    import numpy as np

    from hvd_dqn.agent import reload

    config, env, online = reload.load_online_network(checkpoint_path, 1)
    env.close()
    if config.env_id != "CartPole-v1":
        raise SystemExit(f"cartpole_endings.py: {checkpoint_path} was trained on {config.env_id}, not CartPole-v1")
    game = gym.make("CartPole-v1")
    results = []
    for episode in range(episodes):
        observation, _ = game.reset(seed=seed + episode)
        episode_return, terminated, truncated = 0.0, False, False
        while not (terminated or truncated):
            q_values = online(observation[None].astype(np.float32)).numpy()[0]
            observation, reward, terminated, truncated, _ = game.step(int(q_values.argmax()))
            episode_return += reward
        x, theta = float(observation[0]), float(observation[2])
        results.append((episode_return, ending(terminated, x, theta), x, theta))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1000)
    args = parser.parse_args(argv)
    for path in args.checkpoints:
        if not os.path.isdir(path):
            print(f"cartpole_endings.py: {path}: no such checkpoint folder", file=sys.stderr)
            return 2
        results = play(path, args.episodes, args.seed)
        counts = {}
        for _, why, _, _ in results:
            counts[why] = counts.get(why, 0) + 1
        mean = sum(result[0] for result in results) / len(results)
        print(f"{path}: mean return {mean:.1f}; " + ", ".join(f"{why}: {n}" for why, n in sorted(counts.items())))
        for episode_return, why, x, theta in results:
            print(f"  return {episode_return:5.0f}  {why:18s}  x {x:+.2f}  theta {theta:+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
