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

`hvd_dqn.plan.cost_model` measures the three costs on this machine and checks the prediction against measured runs;
`paper_rows` and `pqn_paper_rows` apply the same formula to GPUs from a hardware profile of measured parts
(hvd_dqn/plan/hardware_profiles.py).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Tuple

from hvd_dqn.rank_split import RankShape, ShapeError, rank_shape  # noqa: F401  (the formula's terms)


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


def gpu_sync_s(profile, gradient_bytes: int, nodes: int, gpus_per_node: int) -> float:
    """What one update's gradient exchange adds on `nodes` x `gpus_per_node` GPUs of `profile`
    (hardware_profiles.HardwareProfile): the ring within a node or across nodes, plus Horovod's negotiation;
    0 for one GPU."""
    workers = nodes * gpus_per_node
    if workers == 1:
        return 0.0
    exchange = profile.exchange
    if nodes > 1:
        bandwidth, latency = exchange.inter_node_bytes_per_s, exchange.inter_node_latency_us
    else:
        bandwidth, latency = exchange.intra_node_bytes_per_s, exchange.intra_node_latency_us
    return ring_allreduce_s(gradient_bytes, workers, bandwidth, latency * 1e-6) + exchange.negotiation_ms * 1e-3


def _speedups(rows: List[dict]) -> List[dict]:
    for row in rows:
        base = next(other for other in rows if other["workers"] == 1 and other["rank_scaling"] == row["rank_scaling"])
        row["speedup"] = round(row["env_steps_per_s"] / base["env_steps_per_s"], 2)
    return rows


def update_with_exchange_ms(profile, batch_size: int, observation_bytes: int, sync_ms: float,
                            updates_per_call: float, draw_ahead: bool, update_cost_ratio: float = 1.0) -> float:
    """One update of a GPU rank with its exchange, on average, in ms: the update the profile timed, or another
    replay agent's doing `update_cost_ratio` times its arithmetic (gpu_costs.agent_extra_ms). The minibatch is
    drawn from the host replay on the sampler thread while the update before it runs (and its exchange): the draws
    of an env step's later updates always; its first too with --draw_ahead, where every env step makes an update
    due (drawn during the step before's last update), and else in line."""
    from hvd_dqn.plan.gpu_costs import agent_extra_ms, gather_ms, table_value
    from hvd_dqn.plan.hardware_profiles import ProfileError

    if not profile.update_host_ms:
        raise ProfileError(f"profile {profile.name!r} has no DQN update figures (update_host_ms)")
    step = table_value(profile.update_host_ms, batch_size, "proportional") + sync_ms  # update, copy, exchange
    if update_cost_ratio != 1.0:  # the timed update itself needs no device figures (the GTX 1080 profile has none)
        step += agent_extra_ms(profile, batch_size, update_cost_ratio)
    draw = gather_ms(profile, 2 * batch_size * observation_bytes)
    if draw_ahead and updates_per_call >= 1:
        return max(draw, step)
    if updates_per_call <= 1:
        return draw + step
    return (draw + (updates_per_call - 1) * max(draw, step) + step) / updates_per_call


@dataclasses.dataclass(frozen=True)
class GpuLearning:
    """How a GPU rank of a replay agent learns: acting overlapped with learning (`overlap`, --pipeline), the
    minibatches drawn ahead of their updates (`draw_ahead`, --draw_ahead), and how many times the arithmetic of
    the update the profile timed the agent's update does (`update_cost_ratio`; 1 for the update the profile timed)."""
    overlap: bool = True
    draw_ahead: bool = True
    update_cost_ratio: float = 1.0


def paper_rows(profile, gradient_bytes: int, observation_bytes: int, batch_size: int, train_frequency: int,
               envs_per_gpu: int, layouts=((1, 1), (1, 8), (4, 8)), modes=("updates", "batch"),
               learning: GpuLearning = GpuLearning()) -> List[dict]:
    """Predicted env steps/s of a replay agent's jobs on `profile`'s GPUs laid out as (nodes, GPUs
    per node), each GPU stepping `envs_per_gpu` envs, in each rank-scaling mode. Per update a GPU rank acts for
    its env steps per update (gpu_costs.acting_ms per vector step) and learns (update_with_exchange_ms);
    with `learning.overlap` (--pipeline) the two run side by side. Below the smallest batch measured the update
    costs what that batch does (a small batch does not fill a GPU), so under `updates` a GPU drawing 32/N pays
    what one drawing 32 does."""
    from hvd_dqn.plan.gpu_costs import acting_ms

    rows = []
    for nodes, per_node in layouts:
        workers = nodes * per_node
        sync = gpu_sync_s(profile, gradient_bytes, nodes, per_node)
        for mode in modes:  # each GPU its own envs; under `updates` the job keeps one GPU's batch and ratio
            shape = rank_shape(mode, envs_per_gpu * workers, batch_size, train_frequency, workers)
            acting = acting_ms(profile, shape.num_envs) / shape.num_envs * shape.env_steps_per_update
            learning_ms = update_with_exchange_ms(profile, shape.batch_size, observation_bytes, 1000 * sync,
                                                  shape.num_envs / shape.env_steps_per_update, learning.draw_ahead,
                                                  learning.update_cost_ratio)
            per_update = max(acting, learning_ms) if learning.overlap else acting + learning_ms
            rate = 1000.0 * workers * shape.env_steps_per_update / per_update
            rows.append(dict(nodes=nodes, gpus_per_node=per_node, workers=workers, rank_scaling=mode,
                             envs_per_gpu=envs_per_gpu, act_ms_per_update=round(acting, 3),
                             learn_ms=round(learning_ms, 3), sync_ms=round(1000 * sync, 3),
                             env_steps_per_s=round(rate, 1)))
    return _speedups(rows)


def pqn_paper_rows(profile, gradient_bytes: int, observation_bytes: int, num_envs: int, rollout_steps: int,
                   num_minibatches: int, update_epochs: int,
                   layouts=((1, 1), (1, 8), (4, 8))) -> List[dict]:
    """Predicted env steps/s of PQN jobs on `profile`'s GPUs laid out as (nodes, GPUs per
    node), every GPU with the preset's envs and minibatches (--counts_per_rank). A rollout is its vector steps'
    acting and then its updates, each waiting for its exchange: nothing overlaps in PQN's cycle.

        seconds per rollout = T x t_act(e) + U x (t_update(m) + t_sync(N)),  env steps/s = N x e x T / that"""
    from hvd_dqn.plan.gpu_costs import acting_ms, pqn_update_ms

    minibatch = num_envs * rollout_steps // num_minibatches
    updates = num_minibatches * update_epochs
    acting_s = rollout_steps * acting_ms(profile, num_envs) / 1000.0
    update_s = pqn_update_ms(profile, minibatch, observation_bytes) / 1000.0
    rows = []
    for nodes, per_node in layouts:
        workers = nodes * per_node
        sync = gpu_sync_s(profile, gradient_bytes, nodes, per_node)
        rate = workers * num_envs * rollout_steps / (acting_s + updates * (update_s + sync))
        rows.append(dict(nodes=nodes, gpus_per_node=per_node, workers=workers, rank_scaling="counts_per_rank",
                         envs_per_gpu=num_envs, acting_ms_per_rollout=round(1000 * acting_s, 1),
                         learn_ms=round(1000 * update_s, 3), sync_ms=round(1000 * sync, 3),
                         env_steps_per_s=round(rate, 1)))
    return _speedups(rows)


def add_hours(rows: List[dict], env_steps: float) -> List[dict]:
    """Each row's hours for `env_steps` at its predicted rate."""
    for row in rows:
        row["hours_to_env_steps"] = round(env_steps / row["env_steps_per_s"] / 3600, 2)
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
