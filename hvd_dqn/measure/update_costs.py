"""What each agent's update costs on this machine, side by side, so that a user can budget a run before choosing
an agent:

    python -m hvd_dqn.measure.update_costs configs/breakout_dopamine.flags configs/breakout_qrdqn.flags \\
        configs/breakout_iqn.flags configs/breakout_c51.flags configs/breakout_rainbow.flags --json=costs.json

For each preset: its agent's own update (its network, targets, loss and optimizer, through Horovod's
DistributedOptimizer at one rank, as a rank trains) on a minibatch of the preset's size drawn from a memory of the
preset's kind (frames or vectors, uniform or prioritised, its n-step returns) filled with random observations. The
presets are timed in alternating rounds (A, B, C, A, B, C, ...) and each reported as its median round, so all
see the same machine load; one thread inside each op and one running ops (one core's worth, as the benchmark's
stages). Reported per preset: updates_per_s and ms_per_update; cost_vs_first, its update's time over the first
preset's; its train_frequency (agent steps per update, per rank); and learner_agent_steps_per_s, updates_per_s x
train_frequency: the agent steps per second one core could train at if acting cost nothing, the learner's ceiling.
Flags after "--" go to every preset (e.g. `-- --batch_size=64`). PQN learns from rollouts, not a replay memory:
`python -m hvd_dqn.measure.benchmark_workers` times its real runs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

PROGRAM = "python -m hvd_dqn.measure.update_costs"
# Big enough to draw minibatches from whatever the presets' n-step and frame stacks need, small enough to fill
# in a second or two: the update's cost does not depend on the memory's size.
MEMORY_CAPACITY = 10_000


class UpdateCostError(Exception):
    pass


def preset_configs(flagfiles, run_flags) -> list:
    """(name, TrainConfig) per preset, the flags after "--" applied to each; every preset is checked before any is
    timed, so a bad one is named at once."""
    from hvd_dqn.agent.factory import agent_entry
    from hvd_dqn.rank_split import learns_from_replay
    from hvd_dqn.config import ConfigError
    from hvd_dqn.flags import config_of_runs

    presets = []
    for flagfile in flagfiles:
        if not os.path.isfile(flagfile):
            raise UpdateCostError(f"{flagfile}: no such preset file")
        try:
            config = config_of_runs(PROGRAM, flagfile, run_flags)
        except ConfigError as error:
            raise UpdateCostError(f"{flagfile}: {error}") from None
        if not learns_from_replay(config):
            raise UpdateCostError(f"{flagfile}: {agent_entry(config).title} learns from rollouts, not a replay memory; "
                                  "python -m hvd_dqn.measure.benchmark_workers times its real runs")
        presets.append((os.path.splitext(os.path.basename(flagfile))[0], config))
    names = [name for name, _ in presets]
    if len(set(names)) != len(names):
        raise UpdateCostError(f"two presets share a name ({', '.join(names)}): the report names each by its file")
    return presets


def update_step(config, rng):
    """A function making one update of `config`'s agent on a fixed minibatch (traced once here, outside any timing)."""
    from hvd_dqn.agent.factory import replay_learner, replay_memory
    from hvd_dqn.envs import make_env_for, spec_of
    from hvd_dqn.measure.training_modes import fill_replay

    env = make_env_for(config.replace(env_threads=1), 1)
    spec = spec_of(env)
    env.close()
    memory = replay_memory(config, spec, 1, MEMORY_CAPACITY)
    fill_replay(memory, spec, 1, rng)
    batch = memory.sample(config.batch_size, rng)
    learner = replay_learner(config, spec)
    del memory

    def step():
        learner.update(batch)
        return 1

    step()
    return step


def update_costs(presets, seconds: float, rounds: int, seed: int = 0) -> dict:
    import numpy as np
    import tensorflow as tf

    from hvd_dqn.agent.factory import agent_entry
    from hvd_dqn.measure.timing import side_by_side

    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    # Each preset's learner traces its own update function: TensorFlow warns of "retracing" from the fifth on,
    # which here is expected, not a fault in the presets.
    level = tf.get_logger().level
    tf.get_logger().setLevel("ERROR")
    try:
        steps = {name: update_step(config, rng) for name, config in presets}
    finally:
        tf.get_logger().setLevel(level)
    rates = side_by_side(steps, seconds, rounds)
    first = presets[0][0]
    results = {}
    for name, config in presets:
        results[name] = dict(
            agent=agent_entry(config).title, env_id=config.env_id, batch_size=config.batch_size, updates_per_s=rates[name],
            ms_per_update=1000.0 / rates[name], cost_vs_first=rates[first] / rates[name],
            train_frequency=config.train_frequency, learner_agent_steps_per_s=rates[name] * config.train_frequency)
    return results


# The settings beyond the network and the batch that change what one update computes. A hardware profile records
# them for the update it timed (`update_settings`), so that the cost model prices another agent's update against
# the one the profile measured, never against an update it assumes.
UPDATE_SETTINGS = ("double_dqn", "dueling", "noisy_nets", "layer_norm", "num_quantiles", "num_atoms",
                   "num_tau_samples", "num_tau_prime_samples", "num_quantile_samples", "quantile_embedding_dim")


def update_settings(config, spec) -> dict:
    """`config`'s agent, its network on `spec`'s observations, and those of UPDATE_SETTINGS it reads (its own, and
    any no agent owns), with their values: what sets its update's arithmetic apart from another preset's at the
    same batch. The network is named as built ("auto" resolved), with the one setting that shapes it: the Nature
    CNN's padding (same padding gives its dense layer 2.5 times the weights) or the MLP's widths."""
    from hvd_dqn.agent import registry
    from hvd_dqn.agent.factory import agent_entry
    from hvd_dqn.agent.networks import network_kind

    entry = agent_entry(config)
    unowned = {name for name in UPDATE_SETTINGS if not any(name in other.owned() for other in registry.entries())}
    network = network_kind(config.network, spec.observation_shape, spec.observation_dtype)
    shape = ({"conv_padding": config.conv_padding} if network == "nature_cnn" else
             {"hidden_sizes": list(config.hidden_sizes)} if network == "mlp" else {})
    return {"agent": entry.name, "network": network, **shape,
            **{name: getattr(config, name) for name in UPDATE_SETTINGS if name in entry.owned() or name in unowned}}


def cost_over(config, timed: dict, seconds: float = 2.0, rounds: int = 3) -> float:
    """How many times the update `timed` describes (`update_settings`'s form) `config`'s update takes on one core
    here, on `config`'s observations, batch, memory and optimizer, timed side by side in alternating rounds (the
    caller has initialised Horovod, one thread each way)."""
    from hvd_dqn.agent.configs import with_settings

    settings = {name: tuple(value) if isinstance(value, list) else value for name, value in timed.items()}
    costs = update_costs([("timed", with_settings(config, **settings)), ("agent", config)], seconds, rounds)
    return costs["agent"]["cost_vs_first"]


def format_table(results: dict, seconds: float, rounds: int) -> str:
    lines = [f"hvd_dqn update costs, one core's worth of threads, {os.cpu_count()} cores here; median of {rounds} "
             f"alternating rounds of {seconds:g} s",
             f"  {'preset':<22} {'agent':<10} {'batch':>5} {'updates/s':>10} {'ms/update':>10} {'vs first':>9} "
             f"{'steps/update':>12} {'learner ceiling (agent steps/s)':>32}"]
    for name, row in results.items():
        lines.append(f"  {name:<22} {row['agent']:<10} {row['batch_size']:>5} {row['updates_per_s']:>10,.1f} "
                     f"{row['ms_per_update']:>10.2f} {row['cost_vs_first']:>8.2f}x {row['train_frequency']:>12} "
                     f"{row['learner_agent_steps_per_s']:>32,.0f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    from hvd_dqn.flags import split_run_flags

    argv, run_flags = split_run_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="+", metavar="PRESET.flags", help="The presets whose updates to time.")
    parser.add_argument("--round_seconds", type=float, default=3.0, help="Seconds per round (3).")
    parser.add_argument("--rounds", type=int, default=5, help="Alternating rounds; the median is reported (5).")
    parser.add_argument("--seed", type=int, default=0, help="Seeds the networks and the minibatches (0).")
    parser.add_argument("--json", help="Also write the figures to this JSON file.")
    args = parser.parse_args(argv)
    try:
        if args.round_seconds <= 0 or args.rounds <= 0:
            raise UpdateCostError("--round_seconds and --rounds must be positive")
        if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
            raise UpdateCostError(f"--json={args.json}: its folder does not exist")
        presets = preset_configs(args.presets, run_flags)
    except UpdateCostError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    from hvd_dqn.run import horovod_setup

    horovod_setup.init_horovod(intra_op_threads=1, inter_op_threads=1)
    results = update_costs(presets, args.round_seconds, args.rounds, args.seed)
    print(format_table(results, args.round_seconds, args.rounds))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"round_seconds": args.round_seconds, "rounds": args.rounds, "cores": os.cpu_count(),
                       "run_flags": run_flags, "presets": results}, handle, indent=2)
            handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
