"""Runs written by hand as hvd_dqn.train leaves them (config.json, episodes.csv, metrics.csv), for the reports'
tests."""
import csv
import json

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_run(folder, env_id, episodes, evals, final_env_steps):
    """A logdir as hvd_dqn.train writes it: episodes (env_steps, rank, return), evals (env_steps, return)."""
    frames = 4 if env_id.startswith("ALE/") else 1
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"env_id": env_id}))
    with open(folder / "episodes.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "rank", "env", "return", "length"])
        for env_steps, rank, episode_return in episodes:
            writer.writerow([env_steps, env_steps * frames, rank, 0, episode_return, 10])
    eval_at = dict(evals)
    with open(folder / "metrics.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "eval_return_mean"])
        for env_steps in range(100, final_env_steps + 1, 100):
            writer.writerow([env_steps, env_steps * frames, eval_at.get(env_steps, "")])
    return str(folder)


def write_suite_run(folder, env_id, seed, window_return, seconds=4000.0, config=None, total=1_000_000):
    """A run of `total` agent steps: an episode of return 0 every 50k steps, then `window_return` in its last 250k
    (per 1M agent steps, `seconds` of training)."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"env_id": env_id, "seed": seed, "agent": "pqn",
                                                    "total_env_steps": total, **(config or {})}))
    with open(folder / "episodes.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "rank", "env", "return", "length", "wall_s"])
        for env_steps in range(50_000, total + 1, 50_000):
            episode_return = window_return if env_steps > total - 250_000 else 0.0
            writer.writerow([env_steps, env_steps * 4, 0, 0, episode_return, 1000, seconds * env_steps / 1e6])
    with open(folder / "metrics.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "env_frames", "eval_return_mean"])
        writer.writerow([total, total * 4, ""])
    return str(folder)
