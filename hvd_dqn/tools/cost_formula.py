"""A cost model of synchronous data-parallel DQN: what N workers' env steps per second and time to a score are,
from three measured stage costs.

Each worker (rank) repeats the same cycle, and the cycles of all ranks meet at the gradient allreduce:

    seconds per update = F_r x t_act(e) + t_learn(b) + t_sync(N)
    job env steps/s    = N x F_r / seconds per update

- e, b, F_r: the rank's envs, its minibatch and its own env steps per update. Under --rank_scaling=updates a
  rank steps E/N of the job's E envs, draws B/N of the batch B and pays F/N env steps per update (the job makes
  one update per F env steps, as one worker does); under `batch` it steps E/N envs (the job's, split), draws a
  whole batch B and makes one update per F of its own env steps.
- t_act(e): one env step of the rank's acting path (Q-network inference over its e envs, epsilon-greedy,
  the emulators' step, the replay insert), per env step.
- t_learn(b): one update as a rank makes it alone: a minibatch of b drawn from replay, the gradient step,
  the priorities written back (prioritised replay).
- t_sync(N): what the gradient exchange across N ranks adds to a rank's update (0 for one worker): the
  allreduce with Horovod's negotiation, and on a rank's one core also the allreduce op's own work and Horovod's
  background thread competing with the update. Measured here as the update with the exchange less the update
  without it; on paper (GPUs) as the ring algorithm's time plus the negotiation.

The terms add up because a rank bound to one core does them one after another (the pipeline's acting thread
shares that core; on a GPU node, acting and learning overlap, which `overlap=True` models as the larger of
acting and learning plus the sync). Time to a score is the env steps it takes, which the scaling studies
measure per worker count, over the rate.

`hvd_dqn.tools.cost_model` measures the three costs on this machine and checks the prediction against measured runs;
`paper_rows` applies the same formula to GPU hardware from published figures (GPU_ASSUMPTIONS).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class RankShape:
    """What one of N ranks does per update."""
    workers: int
    num_envs: int  # e: this rank's envs
    batch_size: int  # b: this rank's minibatch
    env_steps_per_update: float  # F_r: this rank's env steps per update


class ShapeError(ValueError):
    pass


def rank_shape(rank_scaling: str, job_num_envs: int, batch_size: int, train_frequency: int,
               workers: int) -> RankShape:
    """The per-rank shape of a job of `workers` ranks; job_num_envs: E, the envs of the whole job."""
    if job_num_envs % workers:
        raise ShapeError(f"the job's {job_num_envs} envs do not split evenly over {workers} workers")
    if rank_scaling == "updates":
        if batch_size % workers:
            raise ShapeError(f"--batch_size={batch_size} does not split evenly over {workers} workers")
        return RankShape(workers, job_num_envs // workers, batch_size // workers, train_frequency / workers)
    return RankShape(workers, job_num_envs // workers, batch_size, float(train_frequency))


def seconds_per_update(shape: RankShape, act_s: float, learn_s: float, sync_s: float, overlap: bool = False) -> float:
    acting = shape.env_steps_per_update * act_s
    return max(acting, learn_s + sync_s) if overlap else acting + learn_s + sync_s


def job_env_steps_per_s(shape: RankShape, act_s: float, learn_s: float, sync_s: float,
                        overlap: bool = False) -> float:
    return shape.workers * shape.env_steps_per_update / seconds_per_update(shape, act_s, learn_s, sync_s, overlap)


def ring_allreduce_s(gradient_bytes: float, workers: int, bytes_per_s: float, hop_latency_s: float) -> float:
    """The ring algorithm (Patarasuk and Yuan 2009; Horovod's and NCCL's): 2(N-1) steps, each moving 1/N of the
    bytes over the slowest link and paying its latency."""
    if workers == 1:
        return 0.0
    return 2 * (workers - 1) * (gradient_bytes / workers / bytes_per_s + hop_latency_s)


@dataclasses.dataclass(frozen=True)
class Assumption:
    value: float
    unit: str
    source: str


# Every figure the GPU table rests on, with where it comes from. The update and acting costs are from a
# 2016 GPU (GTX 1080): a newer GPU is faster, so the table's GPU times are conservative.
GPU_ASSUMPTIONS = {
    "learn_s": Assumption(
        2.6e-3, "s per update at batch 32 (Nature CNN, one GPU)",
        "Daley & Amato 2021, 'Human-level control without server-grade hardware' (arXiv:2111.01264): a "
        "200M-frame DQN run (50M agent steps, 12.5M updates at one per 4 steps) in 9 h on one GTX 1080 with "
        "acting and learning concurrent, so at most 9 h / 12.5M = 2.6 ms per update"),
    "act_s": Assumption(
        1.15e-3, "s per env step (emulator on one CPU core + one GPU inference)",
        "the same paper's sequential baseline, 25 h for the same run: (25 h - 12.5M x 2.6 ms) / 50M steps"),
    "negotiation_s": Assumption(
        1.0e-3, "s per update (Horovod's negotiation: the tensor waits for the next cycle and its coordination)",
        "Horovod 0.28.1's default cycle time, 1 ms (horovod/common/operations.cc, SetCycleTimeMs(1)); a "
        "Horovod timeline of 2 CPU ranks over MPI measured 1.06 ms of negotiation per update"),
    "nvlink_bytes_per_s": Assumption(
        300e9, "bytes/s per direction between two GPUs of a node",
        "NVIDIA: an A100 has 12 third-generation NVLinks, 600 GB/s in all (nvidia.com/data-center/nvlink), "
        "i.e. 300 GB/s each way; NVSwitch connects every pair of a DGX A100's 8 GPUs at that rate"),
    "nvlink_latency_s": Assumption(
        5e-6, "s per ring step within a node", "an assumption (a few microseconds per NCCL step on NVLink); it "
        "changes the 8-GPU figures by under 0.1 ms"),
    "infiniband_bytes_per_s": Assumption(
        25e9, "bytes/s per GPU between nodes",
        "NVIDIA DGX A100 reference architecture (DGX SuperPOD RA-09950-001, 2020): eight 200 Gb/s HDR "
        "InfiniBand ports per node, one per GPU: 25 GB/s each"),
    "infiniband_latency_s": Assumption(
        4e-6, "s per ring step between nodes",
        "Mellanox, 'InfiniBand In-Network Computing Technology' (2019): communication latencies of 3-4 us"),
}


def gpu_sync_s(gradient_bytes: int, nodes: int, gpus_per_node: int) -> float:
    """What one update's gradient exchange adds on `nodes` x `gpus_per_node` GPUs (GPU_ASSUMPTIONS): the ring
    over NVLink within a node or InfiniBand across nodes, plus Horovod's negotiation; 0 for one GPU."""
    a = {name: assumption.value for name, assumption in GPU_ASSUMPTIONS.items()}
    workers = nodes * gpus_per_node
    if workers == 1:
        return 0.0
    if nodes > 1:
        bandwidth, latency = a["infiniband_bytes_per_s"], a["infiniband_latency_s"]
    else:
        bandwidth, latency = a["nvlink_bytes_per_s"], a["nvlink_latency_s"]
    return ring_allreduce_s(gradient_bytes, workers, bandwidth, latency) + a["negotiation_s"]


def paper_rows(gradient_bytes: int, batch_size: int, train_frequency: int, job_num_envs_per_gpu: int,
               env_steps: float, layouts=((1, 1), (1, 8), (4, 8)), modes=("updates", "batch"),
               overlap: bool = True) -> List[dict]:
    """Predicted env steps/s and hours to `env_steps` for GPU jobs laid out as (nodes, GPUs per node), in each
    rank-scaling mode. The GPU's update is taken as batch-independent at and below the preset's batch (a
    batch of 32 does not fill a GPU: the step is bound by its kernel launches), so under `updates` a GPU
    drawing 32/N costs what one drawing 32 does."""
    a = {name: assumption.value for name, assumption in GPU_ASSUMPTIONS.items()}
    rows = []
    for nodes, per_node in layouts:
        workers = nodes * per_node
        sync = gpu_sync_s(gradient_bytes, nodes, per_node)
        for mode in modes:  # each GPU its own envs; under `updates` the job keeps one GPU's batch and ratio
            shape = rank_shape(mode, job_num_envs_per_gpu * workers, batch_size, train_frequency, workers)
            rate = job_env_steps_per_s(shape, a["act_s"], a["learn_s"], sync, overlap)
            rows.append(dict(nodes=nodes, gpus_per_node=per_node, workers=workers, rank_scaling=mode,
                             sync_ms=round(1000 * sync, 3), env_steps_per_s=round(rate, 1),
                             hours_to_env_steps=round(env_steps / rate / 3600, 2)))
    for row in rows:
        base = next(other for other in rows if other["workers"] == 1 and other["rank_scaling"] == row["rank_scaling"])
        row["speedup"] = round(row["env_steps_per_s"] / base["env_steps_per_s"], 2)
    return rows


class ScoreFigureError(ValueError):
    """A --env_steps_to_score figure that cannot be used; the message names it."""


def parse_env_steps_to_score(entries, layouts_workers) -> dict:
    """--env_steps_to_score RANKS ENV_STEPS SOURCE, given once per rank count: {ranks: (env steps, source)}."""
    parsed = {}
    for ranks_text, steps_text, source in entries or []:
        given = f"--env_steps_to_score {ranks_text} {steps_text} {source}"
        try:
            ranks, steps = int(ranks_text), float(steps_text.replace(",", "").replace("_", ""))
        except ValueError:
            raise ScoreFigureError(f"{given}: RANKS must be an integer and ENV_STEPS a number") from None
        if ranks not in layouts_workers or steps <= 0 or ranks in parsed:
            raise ScoreFigureError(f"{given}: RANKS must be one of the table's GPU counts "
                                   f"({', '.join(map(str, layouts_workers))}), each given once, with ENV_STEPS > 0")
        if not source.strip():
            raise ScoreFigureError(f"{given}: SOURCE must say where the figure comes from")
        parsed[ranks] = (steps, source)
    if parsed and 1 not in parsed:
        raise ScoreFigureError("--env_steps_to_score: one rank's env steps (RANKS 1) are the baseline the "
                               "others are compared with; give them too")
    return parsed


def add_time_to_score(rows: List[dict], env_steps_to_score: Dict[int, Tuple[float, str]],
                      rank_scaling: str) -> None:
    """Time to a score on paper: throughput times sample efficiency. `env_steps_to_score` maps a rank count to
    the env steps a run of the preset with that many ranks needed for the score (measured or predicted) and
    where the figure comes from; the rows of that rank count and mode gain the env steps, their ratio to one
    rank's, and the seconds (and hours) the predicted env steps per second take for them. Rows of other modes
    are left alone: the env steps were taken under `rank_scaling`, and the other mode is another algorithm at
    N > 1. The speed-up is taken from the unrounded times (a score of minutes rounds to a few thousandths of an
    hour, too coarse to divide)."""
    baseline = env_steps_to_score[1][0]
    seconds = {}
    for index, row in enumerate(rows):
        if row["rank_scaling"] != rank_scaling or row["workers"] not in env_steps_to_score:
            continue
        steps, source = env_steps_to_score[row["workers"]]
        seconds[index] = steps / row["env_steps_per_s"]
        row.update(env_steps_to_score=steps, env_steps_ratio=round(steps / baseline, 3), score_source=source,
                   seconds_to_score=round(seconds[index], 1), hours_to_score=round(seconds[index] / 3600, 3))
    one_rank = next(index for index in seconds if rows[index]["workers"] == 1)
    for index, row_seconds in seconds.items():
        rows[index]["speedup_to_score"] = round(seconds[one_rank] / row_seconds, 2)


def prediction_error(predicted: float, measured: float) -> float:
    """Signed relative error of a prediction: +0.10 is 10% too high."""
    return predicted / measured - 1.0 if measured else math.nan


def median_of(values: List[float]) -> Optional[float]:
    values = sorted(value for value in values if value is not None)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def costs_table(costs: Dict[str, Dict]) -> str:
    """The measured costs as lines for the command's report."""
    lines = []
    for name in ("act_s", "learn_s", "sync_s"):
        for key, value in sorted(costs[name].items(), key=lambda item: int(item[0])):
            what = {"act_s": "envs", "learn_s": "batch", "sync_s": "workers"}[name]
            lines.append(f"  {name:<8} {what} {key:>4}: {1000 * value:8.3f} ms")
    return "\n".join(lines)


# PQN (--agent=pqn) on GPUs: each rank's cycle is a rollout (its envs stepped --rollout_steps times) and that
# rollout's updates, each of which waits for the allreduce of its gradient:
#
#     seconds per rollout = t_rollout + U x t_sync(N),    job env steps/s = N x S / seconds per rollout
#
# with S the env steps of a rank's rollout and U its updates (--update_epochs x --num_minibatches). t_rollout is
# a whole rollout of one GPU, acting and updates together, as a published run measured it, so the model needs
# no split of the two; it holds where every GPU runs the preset's envs and minibatches of its own
# (hvd_dqn.train --counts_per_rank), which makes the job's rollout and minibatches N times the preset's.
PQN_GPU_ASSUMPTIONS = {
    "rollout_s": Assumption(
        0.263, "s per rollout of 8 envs x 128 steps and its 16 updates of 256 (Nature CNN with LayerNorm, one GPU)",
        "CleanRL's pqn_atari_envpool.py on Breakout-v5 (the preset configs/breakout_pqn.flags follows): 10M agent "
        "steps in 42.82 minutes on one GPU (CleanRL's docs, rl-algorithms/pqn, runtime table; benchmark/pqn.sh "
        "gives each run one GPU), i.e. 2,569 s over 9,766 rollouts of 1,024 steps; torch with envpool, so "
        "hvd_dqn's TensorFlow on one GPU is assumed to match it"),
}


def pqn_paper_rows(gradient_bytes: int, env_steps_per_rollout: int, updates_per_rollout: int, env_steps: float,
                   layouts=((1, 1), (1, 8), (4, 8))) -> List[dict]:
    """Predicted env steps/s and hours to `env_steps` of PQN jobs laid out as (nodes, GPUs per node), every GPU
    with the preset's envs and minibatches (PQN_GPU_ASSUMPTIONS, and GPU_ASSUMPTIONS for the exchange)."""
    rollout_s = PQN_GPU_ASSUMPTIONS["rollout_s"].value
    rows = []
    for nodes, per_node in layouts:
        workers = nodes * per_node
        sync = gpu_sync_s(gradient_bytes, nodes, per_node)
        rate = workers * env_steps_per_rollout / (rollout_s + updates_per_rollout * sync)
        rows.append(dict(nodes=nodes, gpus_per_node=per_node, workers=workers, rank_scaling="counts_per_rank",
                         sync_ms=round(1000 * sync, 3), env_steps_per_s=round(rate, 1),
                         hours_to_env_steps=round(env_steps / rate / 3600, 2)))
    for row in rows:
        row["speedup"] = round(row["env_steps_per_s"] / rows[0]["env_steps_per_s"], 2)
    return rows
