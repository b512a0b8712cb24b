"""`python -m hvd_dqn.plan.cost_model --paper`: GPU jobs predicted from a hardware profile
(hvd_dqn/plan/hardware_profiles.py) with the cost model's formula (hvd_dqn/plan/cost_formula.py), for one
preset: the rows for each layout of nodes and GPUs, their hours to a score when the env steps to it are given,
and the profile's own measured loops beside the model."""
from __future__ import annotations

import dataclasses

from hvd_dqn.agent import registry
from hvd_dqn.agent.factory import acts_ahead, agent_entry
from hvd_dqn.rank_split import learns_from_replay
from hvd_dqn.plan import cost_formula, gpu_costs, hardware_profiles
from hvd_dqn.measure.benchmark_workers import BenchmarkError

PROGRAM = "hvd_dqn.plan.cost_model"


def env_steps_to_score(args, layouts) -> dict:
    """--env_steps_to_score's figures, checked against the table's GPU counts before anything is timed."""
    try:
        return cost_formula.parse_env_steps_to_score(args.env_steps_to_score,
                                                     sorted({nodes * gpus for nodes, gpus in layouts}))
    except cost_formula.ScoreFigureError as error:
        raise BenchmarkError(str(error)) from None


def paper(config, args) -> dict:
    """GPU nodes and clusters from a hardware profile: the rows, and how the profile's own loops compare."""
    import numpy as np

    from hvd_dqn.agent.factory import draws_ahead, online_network
    from hvd_dqn.envs import probe_spec, steps_outside_python

    try:
        profile = hardware_profiles.load_profile(args.profile)
    except hardware_profiles.ProfileError as error:
        raise BenchmarkError(str(error)) from None
    layouts = parse_layouts(args.layouts)
    to_score = env_steps_to_score(args, layouts)
    spec = probe_spec(config)
    check_observations(config, spec, profile)
    if learns_from_replay(config):  # before any network is built: measuring it sets TensorFlow's threads
        ratio, ratio_source = update_cost_ratio(config, spec, args.update_cost_ratio, profile.update_timed)
    network = online_network(config, spec)
    gradient_bytes = 4 * int(network.count_params())
    observation_bytes = int(np.prod(spec.observation_shape)) * np.dtype(spec.observation_dtype).itemsize
    envs_per_gpu = args.envs_per_gpu or config.num_envs
    entry = agent_entry(config)
    report = {"profile": profile.to_json(), "gradient_bytes": gradient_bytes, "observation_bytes": observation_bytes,
              "envs_per_gpu": envs_per_gpu, "env_steps": args.env_steps, "agent": entry.name,
              "agent_title": entry.title, "memory": entry.memory, "validation": gpu_costs.validation_rows(profile)}
    try:
        if not learns_from_replay(config):  # a rollout agent (PQN): the profile's PQN update
            if (envs_per_gpu * config.rollout_steps) % config.num_minibatches:
                raise BenchmarkError(f"--envs_per_gpu={envs_per_gpu}: a rollout of {envs_per_gpu} x "
                                     f"{config.rollout_steps} steps does not split into {config.num_minibatches} "
                                     "minibatches")
            rows = cost_formula.pqn_paper_rows(profile, gradient_bytes, observation_bytes, envs_per_gpu,
                                               config.rollout_steps, config.num_minibatches, config.update_epochs,
                                               layouts)
            report.update(rank_scaling="counts_per_rank", rows=rows)
        else:
            overlap = acts_ahead(config, steps_outside_python(config.env_id))
            draw_ahead = draws_ahead(config, update_on_gpu=True)  # --draw_ahead=auto is on with a GPU
            rows = cost_formula.paper_rows(profile, gradient_bytes, observation_bytes, config.batch_size,
                                           config.train_frequency, envs_per_gpu, layouts,
                                           learning=cost_formula.GpuLearning(overlap, draw_ahead, ratio))
            report.update(rank_scaling=config.rank_scaling, rows=rows, overlap=overlap, draw_ahead=draw_ahead,
                          update_cost_ratio=round(ratio, 3), update_cost_ratio_source=ratio_source)
    except (cost_formula.ShapeError, hardware_profiles.ProfileError) as error:
        raise BenchmarkError(str(error)) from None
    cost_formula.add_hours(rows, args.env_steps)
    if to_score:
        cost_formula.add_time_to_score(rows, to_score, report["rank_scaling"])
    return report


def check_observations(config, spec, profile) -> None:
    """Every part of a profile was timed on one kind of observation: its update on that network's input, its
    emulators on that env. A preset on other observations would borrow times that are not its own (CartPole's
    MLP priced at an Atari CNN's update), so it is refused, whatever --update_cost_ratio says."""
    if tuple(spec.observation_shape) != tuple(profile.observation_shape):
        shape = hardware_profiles.describe_shape
        raise BenchmarkError(
            f"profile {profile.name} was timed on observations of shape {shape(profile.observation_shape)}, and "
            f"{config.env_id}'s are {shape(spec.observation_shape)}: its times are not this preset's; write a "
            "profile with this preset (python -m hvd_dqn.plan.calibrate --flagfile=PRESET --out=PROFILE.json)")


def update_cost_ratio(config, spec, given, timed: dict):
    """(how many times the arithmetic of the update the profile timed (`timed`) the preset's update does, where that
    figure comes from). 1 where the preset's update is the one timed (a profile calibrated with this preset; DQN
    on the Nature CNN with valid padding and without extras on a built-in profile). Otherwise `given`
    (--update_cost_ratio), or else measured here: the preset's update against the timed one, each on its own
    network, on the preset's observations (`spec`, the profile's: `check_observations`) and batch, on one CPU core,
    side by side (a CPU at a small batch is bound by arithmetic, so the ratio of times is that of the work; a GPU's
    fixed costs are in the profile's measured figures). Without the check, a profile calibrated with a QR-DQN
    preset would have its QR-DQN update priced as DQN's plus QR-DQN's extra arithmetic: that arithmetic twice."""
    from hvd_dqn.flags import setting_names
    from hvd_dqn.measure.update_costs import cost_over, update_settings
    from hvd_dqn.run import horovod_setup

    if given is not None:
        return given, f"--update_cost_ratio={given:g}"
    preset = update_settings(config, spec)
    if preset == timed:
        return 1.0, "the preset's own update is the one the profile timed"
    unknown = sorted(set(timed) - set(setting_names()))
    if unknown:
        raise BenchmarkError(f"the profile's update_timed names {', '.join(unknown)}, which no --flag of this hvd_dqn "
                             "is: write the profile again with python -m hvd_dqn.plan.calibrate")
    try:
        registry.entry(timed["agent"])
    except registry.UnknownAgent:
        raise BenchmarkError(f"the profile timed the update of --agent={timed['agent']}, which is not registered "
                             "here, so this preset's update cannot be timed against it: register that agent, "
                             "give --update_cost_ratio, or use a profile of this preset") from None
    horovod_setup.init_horovod(intra_op_threads=1, inter_op_threads=1)
    ratio = cost_over(config, timed)
    return ratio, (f"measured here: the update of {hardware_profiles.describe_update(preset)} took {ratio:.2f}x that "
                   f"of {hardware_profiles.describe_update(timed)}, the update the profile timed (the same "
                   f"observations, batch {config.batch_size} and optimizer), on one CPU core, in alternating rounds")


def parse_layouts(text: str):
    """--layouts=1x1,1x8,4x8: (nodes, GPUs per node) pairs, the first of them one GPU."""
    try:
        layouts = [tuple(int(part) for part in item.lower().split("x")) for item in text.split(",") if item.strip()]
    except ValueError:
        layouts = []
    if not layouts or any(len(layout) != 2 or min(layout) <= 0 for layout in layouts) or layouts[0] != (1, 1):
        raise BenchmarkError(f"--layouts={text}: must list NODESxGPUS pairs starting with 1x1, e.g. 1x1,1x8,4x8")
    return layouts


def print_paper(report: dict) -> None:
    profile = hardware_profiles.profile_from_json(report["profile"], "the report")  # its own JSON, read back
    rollout = report["memory"] == "rollout"
    how = (report["agent_title"] + ", every GPU with the preset's rollout and minibatches (--counts_per_rank), "
           "nothing overlapped" if rollout else report["agent_title"] + ", acting "
           + ("overlapped with" if report["overlap"] else "then") + " learning (--pipeline), minibatches "
           + ("drawn ahead" if report["draw_ahead"] else "drawn in line at each env step") + " (--draw_ahead)")
    print(f"{PROGRAM}: on paper (a prediction from measured parts, not a measurement), profile {profile.name}, "
          f"{report['gradient_bytes'] / 1e6:.1f} MB of gradients per update, {report['envs_per_gpu']} envs per GPU, "
          f"{how}, {report['env_steps']:,} env steps")
    if not rollout:
        timed = hardware_profiles.describe_update(profile.update_timed)
        if report["update_cost_ratio"] == 1.0:
            print(f"  its update: the profile's, {timed}; the ratio 1.00x: {report['update_cost_ratio_source']}")
        else:
            print(f"  its update: the profile's, {timed}, and {report['update_cost_ratio'] - 1:.2f} times its "
                  "arithmetic more at the full device's cost per sample (none less where it is cheaper); the ratio "
                  f"{report['update_cost_ratio']:.2f}x is {report['update_cost_ratio_source']}")
    print(f"  {'nodes x GPUs':>12} {'mode':>15} {'sync ms':>8} {'env steps/s':>12} {'speed-up':>9} {'hours':>7}")
    for row in report["rows"]:
        print(f"  {row['nodes']:>6} x {row['gpus_per_node']:<3} {row['rank_scaling']:>15} {row['sync_ms']:>8.3f} "
              f"{row['env_steps_per_s']:>12,.0f} {row['speedup']:>8.2f}x {row['hours_to_env_steps']:>7.2f}")
    scored = [row for row in report["rows"] if "hours_to_score" in row]
    if scored:
        print(f"to the score, --rank_scaling={report['rank_scaling']} (throughput above times the env steps each "
              "rank count needed):")
        print(f"  {'GPUs':>5} {'env steps':>12} {'ratio':>6} {'minutes':>8} {'speed-up':>9}  source")
        # The ratio from the env steps themselves: the report's is rounded to 3 decimals, and rounding that again
        # to 2 can go the wrong way (0.9147 -> 0.915 -> 0.92).
        one_gpu_steps = next(row["env_steps_to_score"] for row in scored if row["workers"] == 1)
        for row in scored:
            ratio = row["env_steps_to_score"] / one_gpu_steps
            print(f"  {row['workers']:>5} {row['env_steps_to_score']:>12,.0f} {ratio:>5.2f}x "
                  f"{row['seconds_to_score'] / 60:>8.2f} {row['speedup_to_score']:>8.2f}x  {row['score_source']}")
    if report["validation"]:
        print("the profile's measured loops (acting then learning, Atari observations) against the model from "
              "its parts:")
        for row in report["validation"]:
            print(f"  {row['loop']:<55} measured {row['measured']:>7,.0f}  predicted {row['predicted']:>7,.0f}  "
                  f"({100 * row['error']:+.1f}%)")
    print("\n".join(hardware_profiles.describe(profile)))
