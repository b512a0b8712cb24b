"""Runs a CleanRL script unchanged and writes its training episodes as hvd_dqn writes them, so that both are read
by the same code: an episodes.csv with env_steps, return and wall_s, the seconds since the script's training
loop began. Runs in the peer's own venv (see pqn_side_by_side.py), not in hvd_dqn's.

    PEER/bin/python studies/peer_episodes.py --out=RUN/episodes.csv --target=475 --window=100 \
        -- CLEANRL/cleanrl/pqn.py --seed=1 --no-cuda

How it reads the script without editing it:
- the clock starts at the first reset of its vector env (gymnasium's, or for the envpool scripts the gym
  wrapper around the pool): CleanRL's scripts take `start_time = time.time()` on the line before
  `envs.reset(...)`, so wall_s means what their SPS means, and what hvd_dqn's wall_s means (the training
  loop's start, after imports and building the network);
- an episode is each `charts/episodic_return` scalar the script logs to TensorBoard, at the global step it
  gives, in the order logged (by env index within a step, as hvd_dqn orders them);
- with --target, the run stops once the mean of the last --window episodes reaches it (gymnasium's "solved"),
  as hvd_dqn's presets stop with --stop_at_train_return, so neither spends time after the score."""
import argparse
import csv
import os
import runpy
import sys
import time


class Solved(Exception):
    """Raised from inside the script's logging once the target is reached, to end its loop."""


def reset_classes() -> list:
    """The classes whose first reset starts the clock: gymnasium's vector envs (pqn.py), and for the envpool
    scripts (gym 0.23) gym.Wrapper, through which their RecordEpisodeStatistics resets the pool."""
    classes = []
    try:
        import gymnasium
        classes += [gymnasium.vector.SyncVectorEnv, gymnasium.vector.AsyncVectorEnv]
    except ImportError:
        pass
    try:
        import gym
        classes.append(gym.Wrapper)
    except ImportError:
        pass
    if not classes:
        raise SystemExit("peer_episodes.py: neither gymnasium nor gym is installed in this venv")
    return classes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="episodes.csv to write")
    parser.add_argument("--target", type=float, default=None, help="stop once the last --window episodes average it")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("script", help="the CleanRL script, then its own arguments")
    parser.add_argument("script_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()

    from torch.utils.tensorboard import SummaryWriter

    started = []
    returns = []
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    handle = open(args.out, "w", newline="")
    writer = csv.writer(handle)
    writer.writerow(["env_steps", "return", "wall_s"])

    for env_class in reset_classes():
        original_reset = env_class.reset

        def reset(self, *positional, _original=original_reset, **keywords):
            if not started:
                started.append(time.time())
            return _original(self, *positional, **keywords)

        env_class.reset = reset

    original_add_scalar = SummaryWriter.add_scalar

    def add_scalar(self, tag, value, global_step=None, *positional, **keywords):
        original_add_scalar(self, tag, value, global_step, *positional, **keywords)
        if tag != "charts/episodic_return":
            return
        wall_s = time.time() - started[0]
        episode_return = float(value)
        returns.append(episode_return)
        writer.writerow([int(global_step), f"{episode_return:g}", f"{wall_s:.2f}"])
        handle.flush()
        recent = returns[-args.window:]
        if args.target is not None and len(recent) == args.window and sum(recent) / args.window >= args.target:
            raise Solved()

    SummaryWriter.add_scalar = add_scalar
    sys.argv = [args.script] + [arg for arg in args.script_args if arg != "--"]
    try:
        runpy.run_path(args.script, run_name="__main__")
    except Solved:
        print(f"solved: the last {args.window} episodes average >= {args.target:g}", flush=True)
    finally:
        handle.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
