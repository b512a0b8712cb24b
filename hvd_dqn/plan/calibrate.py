"""Measures this machine's hardware profile for the cost model, for one preset:

    python -m hvd_dqn.plan.calibrate --flagfile=configs/pong.flags --out=profile.json [-- more train flags]
    python -m hvd_dqn.plan.cost_model --flagfile=configs/pong.flags --paper --profile=profile.json

It records what it runs on (the GPUs TensorFlow sees, whether Horovod was built with NCCL, MPI and Gloo) and
times, in alternating rounds, each part the model (hvd_dqn/plan/hardware_profiles.py) needs, on the device a rank
of this machine trains on (its GPU, else its CPU):
- the preset's update by batch size with the batch already on the device, and from host memory (DQN); PQN's
  minibatch update on the device. The profile says whose update it timed (its agent, double DQN, dueling and
  the like), and the cost model prices another preset's update by its cost against this one;
- one greedy forward pass by the number of envs in the call, and the emulators' agent steps per second, one
  thread per env up to the cores this process may use;
- the acting path as the trainer runs it (actions, emulators, the store); less the forward pass and the
  emulators, it gives the host's cost per vector step and per agent step (a line through the env counts);
- a minibatch drawn from the preset's replay memory (DQN) or rollout (PQN), per byte of its observations, and
  the copy of a batch to the device;
- with --ranks N >= 2, the gradient allreduce of the preset's network across N local ranks under horovodrun
  (`hvd_dqn.measure.benchmark`): the ring's bandwidth is the machine's loopback stream, and what the measured
  allreduce takes beyond the ring is Horovod's negotiation. Between nodes nothing can be measured from one
  machine; the profile repeats the local figures there and says so.
The profile is a JSON file in the form of the built-in ones; `cost_model --paper --profile=FILE` predicts this
machine's jobs on 1..N of its GPUs (or CPU ranks) from it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

import numpy as np

from hvd_dqn.rank_split import learns_from_replay
from hvd_dqn.plan import hardware_profiles
from hvd_dqn.measure.benchmark_workers import BenchmarkError, resolved_config
from hvd_dqn.measure.update_costs import update_settings
from hvd_dqn.plan.profile_parts import measure_parts

PROGRAM = "hvd_dqn.plan.calibrate"


def machine_facts() -> dict:
    """The devices TensorFlow sees and Horovod's build, and the host's cores."""
    import horovod
    import horovod.tensorflow as hvd
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    names = []
    for gpu in gpus:
        try:
            names.append(tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name))
        except (ValueError, RuntimeError):
            names.append(gpu.name)
    return {"gpus": names, "cores": len(os.sched_getaffinity(0)), "platform": platform.platform(),
            "tensorflow": tf.__version__, "horovod": horovod.__version__,
            "horovod_nccl": bool(hvd.nccl_built()), "horovod_mpi": bool(hvd.mpi_built()),
            "horovod_gloo": bool(hvd.gloo_built()), "horovod_cuda": bool(hvd.cuda_built())}


def non_negative_line(xs, ys):
    """(intercept, slope) of the least-squares line through the points, neither below zero: a cost that falls as
    the size grows is noise, taken as a flat cost; a negative fixed cost as none, the line through the origin."""
    if len(xs) == 1:
        return 0.0, max(0.0, ys[0] / xs[0])
    # Weighted by 1/y: the relative error at each size counts alike, so the small sizes a preset uses are not
    # given up for the large ones (a draw of 512 costs ten times one of 32).
    slope, intercept = np.polyfit(xs, ys, 1, w=1.0 / np.asarray(ys, dtype=float))
    if slope < 0:
        return max(0.0, float(np.mean(ys))), 0.0
    if intercept < 0:
        return 0.0, max(0.0, float(np.dot(xs, ys) / np.dot(xs, xs)))
    return float(intercept), float(slope)


def host_costs(acting_ms: dict, forward_ms: dict, emulator_steps_per_s: dict):
    """The host's cost per vector step and per agent step: the acting path less its forward pass and emulators,
    as a line through the env counts (intercept: per call; slope: per agent step)."""
    counts = sorted(acting_ms)
    rest = [acting_ms[e] - forward_ms[e] - 1000.0 * e / emulator_steps_per_s[e] for e in counts]
    return non_negative_line(counts, rest)


def measure_exchange(args, train_flags, ranks: int) -> dict:
    """The preset's gradient allreduce across `ranks` local ranks, through hvd_dqn.measure.benchmark."""
    from hvd_dqn.run import horovod_setup

    with tempfile.TemporaryDirectory(prefix="hvd_dqn_calibrate_") as folder:
        path = os.path.join(folder, "allreduce.json")
        horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
        command = [horovodrun, "-np", str(ranks), sys.executable, "-m", "hvd_dqn.measure.benchmark",
                   f"--flagfile={args.flagfile}", *train_flags, f"--round_seconds={args.round_seconds}",
                   f"--rounds={args.rounds}", f"--json={path}"]
        result = subprocess.run(command, capture_output=True, text=True, env=horovod_setup.launcher_environment())
        if result.returncode != 0:
            last = (result.stderr or result.stdout).strip().splitlines()[-1:]
            raise BenchmarkError(f"the allreduce across {ranks} ranks failed (status {result.returncode}): {last}")
        with open(path) as handle:
            return json.load(handle)


def exchange_of(measured, stamp: str):
    """The profile's exchange from a measured allreduce: the ring at the loopback stream's bandwidth, the rest of
    the measured time Horovod's negotiation; with nothing measured, Horovod's default cycle and no bandwidth
    limit worth naming (one rank exchanges nothing)."""
    if not measured:
        return (hardware_profiles.Exchange(1.0, 1e12, 0.0, 1e12, 0.0),
                {"negotiation_ms": "not measured (--ranks=1): Horovod's default cycle time, 1 ms"})
    ranks, gradient_bytes = measured["ranks"], measured["gradient_bytes_per_update"]
    bandwidth = measured["loopback_bytes_per_s"]
    ring_ms = 1000.0 * 2 * (ranks - 1) * gradient_bytes / ranks / bandwidth
    negotiation = max(0.0, measured["allreduce_ms_per_update"] - ring_ms)
    where = f"{stamp}: the allreduce of {gradient_bytes:,} B across {ranks} local ranks took " \
            f"{measured['allreduce_ms_per_update']:.3f} ms"
    sources = {"negotiation_ms": where + f", of which the ring at the loopback bandwidth is {ring_ms:.3f} ms",
               "intra_node_bytes_per_s": stamp + ": a TCP stream through 127.0.0.1",
               "intra_node_latency_us": "taken as 0: within the negotiation figure",
               "inter_node_bytes_per_s": "not measured (one machine): the local figure, so rows of several "
                                         "nodes are optimistic",
               "inter_node_latency_us": "not measured (one machine): 0"}
    return hardware_profiles.Exchange(negotiation, bandwidth, 0.0, bandwidth, 0.0), sources


def profile_of(name: str, facts: dict, parts: dict, exchange, exchange_sources: dict, update_timed: dict,
               observation_shape) -> hardware_profiles.HardwareProfile:
    stamp = f"measured by {PROGRAM} on {datetime.date.today().isoformat()}"
    host_call_ms, host_store_ms = host_costs(parts["acting_ms"], parts["forward_ms"], parts["emulator_steps_per_s"])
    batches = sorted(parts["gather_ms"])
    batch_bytes = [parts["observations_per_sample"] * batch * parts["observation_bytes"] for batch in batches]
    draws = [parts["gather_ms"][batch] for batch in batches]
    draw_ms, gather_ms_per_byte = non_negative_line(batch_bytes, draws)
    if gather_ms_per_byte == 0:  # larger draws timed as cheaper: noise; a draw's cost grows with its bytes
        draw_ms, gather_ms_per_byte = 0.0, float(np.median([ms / size for ms, size in zip(draws, batch_bytes)]))
    device = ", ".join(facts["gpus"]) or f"no GPU: a CPU rank with {facts['cores']} core(s)"
    sources = {field: stamp for field in (*hardware_profiles.TABLES, "copy_bytes_per_s")}
    sources.update(host_call_ms=stamp + ": the acting path less its forward pass and emulators, the intercept of a "
                                        "line through the env counts",
                   host_store_ms=stamp + ": the slope of the same line",
                   host_gather_ns_per_byte=stamp + ": a minibatch's draw from the preset's memory, per byte of "
                                                   "its two observations (DQN) or one (PQN): the slope of a line "
                                                   "through the batch sizes",
                   host_draw_ms=stamp + ": the intercept of the same line, per minibatch",
                   **exchange_sources)
    return hardware_profiles.HardwareProfile(
        name=name, description=f"{device}; {facts['platform']}", host_cores=facts["cores"],
        update_device_ms=parts["update_device_ms"], update_host_ms=parts["update_host_ms"],
        pqn_update_device_ms=parts["pqn_update_device_ms"], forward_ms=parts["forward_ms"],
        emulator_steps_per_s=parts["emulator_steps_per_s"], copy_bytes_per_s=parts["copy_bytes_per_s"],
        host_call_ms=host_call_ms, host_store_ms=host_store_ms, host_gather_ns_per_byte=gather_ms_per_byte * 1e6,
        host_draw_ms=draw_ms,
        exchange=exchange, sources=sources, update_timed=update_timed, observation_shape=tuple(observation_shape),
        machine=dict(facts, acting_ms=parts["acting_ms"], gather_ms=parts["gather_ms"]))  # the raw figures


def default_ranks(facts: dict) -> int:
    """One rank per GPU where there are two or more; on CPUs, two ranks where there are two cores."""
    return len(facts["gpus"]) if len(facts["gpus"]) >= 2 else min(2, facts["cores"])


def gpu_check(facts: dict, driver_present: bool) -> list:
    """Problems with a GPU machine's set-up, each with its fix in one line; none without an NVIDIA driver."""
    if not driver_present:
        return []
    problems = []
    if not facts["gpus"]:
        version = facts.get("tensorflow", "<the pinned version>")
        problems.append("an NVIDIA driver is present but TensorFlow sees no GPU: install TensorFlow's CUDA build "
                        f"into the venv: .venv/bin/pip install 'tensorflow[and-cuda]=={version}'")
    if not facts["horovod_nccl"]:
        problems.append("Horovod was built without NCCL, so GPU gradients go through the host: rebuild it with "
                        "HOROVOD_GPU_OPERATIONS=NCCL scripts/setup.sh (CUDA's nvcc and libnccl-dev installed)")
    return problems


def nvidia_driver_present() -> bool:
    return os.path.exists("/proc/driver/nvidia/version")


def parse_sizes(text: str, flag: str):
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        values = []
    if not values or values[0] <= 0 or len(values) != len([part for part in text.split(",") if part.strip()]):
        raise BenchmarkError(f"{flag}={text}: must list distinct positive sizes, e.g. 1,4,16")
    return values


def main(argv=None) -> int:
    from hvd_dqn.flags import split_run_flags

    argv, train_flags = split_run_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("--flagfile", required=False, help="The preset whose network, envs and memory are timed.")
    parser.add_argument("--out", required=False, help="Where the profile (JSON) is written.")
    parser.add_argument("--name", default=None, help="The profile's name (default: the machine's, from the file).")
    parser.add_argument("--envs", default=None, help="Env counts to time, comma-separated (default: 1, the preset's "
                                                     "per rank, and the cores).")
    parser.add_argument("--batches", default=None, help="Batch sizes to time (default: the preset's with 4x and 16x it "
                                                        "for DQN, half and twice it for PQN).")
    parser.add_argument("--ranks", type=int, default=None,
                        help="Local ranks for the allreduce (default: one per GPU, or 2 on a CPU host); 1: skip it.")
    parser.add_argument("--round_seconds", type=float, default=2.0, help="Seconds per measurement round.")
    parser.add_argument("--rounds", type=int, default=3, help="Alternating rounds per part; medians are used.")
    parser.add_argument("--replay_rows", type=int, default=100_000,
                        help="Transitions in the memory minibatches are drawn from (at most the preset's).")
    parser.add_argument("--check_gpu", action="store_true",
                        help="Only check a GPU machine's set-up (driver, TensorFlow's GPUs, Horovod's NCCL); exit 1 "
                             "with the fix if something is missing.")
    args = parser.parse_args(argv)
    try:
        from hvd_dqn.run import horovod_setup

        if args.check_gpu:
            horovod_setup.init_horovod()
            problems = gpu_check(machine_facts(), nvidia_driver_present())
            for problem in problems:
                print(f"{PROGRAM}: {problem}", file=sys.stderr)
            if not problems:
                print(f"{PROGRAM}: " + ("no NVIDIA driver on this machine; nothing to check" if not
                                        nvidia_driver_present() else "TensorFlow sees the GPUs and Horovod has NCCL"))
            return 1 if problems else 0
        if not args.flagfile or not args.out:
            raise BenchmarkError("--flagfile and --out are required (or --check_gpu alone)")
        if not os.path.exists(args.flagfile):
            raise BenchmarkError(f"--flagfile={args.flagfile}: no such file")
        if args.round_seconds <= 0 or args.rounds <= 0 or args.replay_rows <= 0:
            raise BenchmarkError("--round_seconds, --rounds and --replay_rows must be positive")
        out_folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(out_folder) or not os.access(out_folder, os.W_OK):
            raise BenchmarkError(f"--out={args.out}: its folder does not exist or cannot be written")
        config = resolved_config(args.flagfile, train_flags)
        # TensorFlow's threads and the cores as a rank of the preset has them (--cores_per_rank binds it)
        horovod_setup.init_horovod(config.intra_op_threads, config.inter_op_threads,
                                   cores_per_rank=config.cores_per_rank)
        facts = machine_facts()
        per_rank = config.num_envs
        envs = parse_sizes(args.envs, "--envs") if args.envs else sorted({1, per_rank, max(facts["cores"], 2)})
        dqn = learns_from_replay(config)
        batch = config.batch_size if dqn else config.num_envs * config.rollout_steps // config.num_minibatches
        # PQN's minibatches are large already (a CPU takes seconds for 16 times one); DQN's small ones are launch-bound
        default = [batch, 4 * batch, 16 * batch] if dqn else [max(1, batch // 2), batch, 2 * batch]
        batches = parse_sizes(args.batches, "--batches") if args.batches else default
        ranks = args.ranks if args.ranks is not None else default_ranks(facts)
        if ranks < 1:
            raise BenchmarkError(f"--ranks={ranks}: must be 1 (no allreduce) or more")
        for problem in gpu_check(facts, nvidia_driver_present()):
            print(f"{PROGRAM}: warning: {problem}", file=sys.stderr)
        print(f"{PROGRAM}: timing envs {envs}, batches {batches} on "
              f"{', '.join(facts['gpus']) or 'the CPU'} ...", flush=True)
        parts = measure_parts(config, envs, batches, args.round_seconds, args.rounds, args.replay_rows)
        measured = measure_exchange(args, train_flags, ranks) if ranks >= 2 else None
        stamp = f"measured by {PROGRAM} on {datetime.date.today().isoformat()}"
        exchange, exchange_sources = exchange_of(measured, stamp)
        name = args.name or os.path.splitext(os.path.basename(args.out))[0]
        # The parts time the preset's own update on its own observations: the cost model prices another preset's
        # update against it, on the same observations only.
        from hvd_dqn.envs import probe_spec

        spec = probe_spec(config)
        profile = profile_of(name, facts, parts, exchange, exchange_sources, update_settings(config, spec),
                             spec.observation_shape)
        hardware_profiles.save_profile(profile, args.out)
        print("\n".join(hardware_profiles.describe(profile, [*hardware_profiles.TABLES, *hardware_profiles.SCALARS])))
        print(f"{PROGRAM}: wrote {args.out}; predict with python -m hvd_dqn.plan.cost_model "
              f"--flagfile={args.flagfile} --paper --profile={args.out}")
    except (BenchmarkError, hardware_profiles.ProfileError, OSError) as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
