"""Runs Dopamine's own trainer unchanged and writes its training episodes as hvd_dqn writes them: an episodes.csv
with env_steps (Dopamine's agent steps so far, at the episode's end), return and wall_s (seconds since its first
episode began), so both are read by the same code. Runs in Dopamine's own venv (studies/peer_venv.sh ... dopamine),
not in hvd_dqn's.

    PEERS/dopamine/bin/python studies/dopamine_episodes.py --out=RUN/episodes.csv -- \
        --base_dir=RUN/dopamine --gin_files=quantile.gin --gin_bindings=...

It wraps `Runner._run_one_episode` (dopamine/discrete_domains/run_experiment.py), which returns each episode's
length in agent steps and its return, and then hands the remaining arguments to dopamine.discrete_domains.train.
The clock starts when the first episode begins: after imports, the network's building and JAX's first traces of
nothing but the agent's construction, as hvd_dqn's wall_s starts at its training loop."""
import argparse
import csv
import runpy
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="The episodes.csv to write.")
    args, rest = parser.parse_known_args()
    if rest[:1] == ["--"]:
        rest = rest[1:]

    from dopamine.discrete_domains import run_experiment

    handle = open(args.out, "w", newline="")
    writer = csv.writer(handle)
    writer.writerow(["env_steps", "env_frames", "rank", "env", "return", "length", "wall_s"])
    state = {"start": None, "steps": 0}
    run_one_episode = run_experiment.Runner._run_one_episode

    def recorded_episode(runner):
        if state["start"] is None:
            state["start"] = time.perf_counter()
        length, episode_return = run_one_episode(runner)
        state["steps"] += length
        writer.writerow([state["steps"], state["steps"] * 4, 0, 0, float(episode_return), length,
                         round(time.perf_counter() - state["start"], 3)])
        handle.flush()
        return length, episode_return

    run_experiment.Runner._run_one_episode = recorded_episode
    sys.argv = ["dopamine.discrete_domains.train", *rest]
    try:
        runpy.run_module("dopamine.discrete_domains.train", run_name="__main__")
    finally:
        handle.close()


if __name__ == "__main__":
    main()
