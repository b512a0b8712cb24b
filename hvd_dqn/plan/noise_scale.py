"""How large a global batch a preset can use before it pays in env steps, and so how many ranks of the default
--rank_scaling=batch keep one rank's sample efficiency, measured from gradients alone:

    .venv/bin/python -m hvd_dqn.train --flagfile=configs/cartpole.flags --logdir=runs/cartpole_noise \\
        --checkpoint_replay --checkpoint_interval_env_steps=10000 --keep_checkpoints=100
    .venv/bin/python -m hvd_dqn.plan.noise_scale runs/cartpole_noise --json=noise.json

The gradient noise scale (McCandlish, Kaplan, Amodei et al. 2018, "An Empirical Model of Large-Batch Training",
arXiv:1812.06162) is B_simple = tr(Sigma) / |G|^2: the per-transition gradient's variance over the squared norm of
the true gradient. A batch much smaller than it gives a noisy gradient; a batch beyond it, hardly a better one.
Under --rank_scaling=batch N ranks draw a global batch of N b (b a rank's batch) and make N times fewer updates per
env step at N times the step size. Up to N = B / b ranks the growing batch buys a better gradient; beyond, the fewer
updates are made up for by the larger step alone, and env steps hold only as far as the preset's step size can rise
(which python -m hvd_dqn.plan.step_headroom measures on one rank). Their model, which fits supervised, generative
and RL tasks (Dota, Atari with A2C and PPO), says that at the best step size for each batch B, E = E_min (1 + B /
B_crit) examples reach a loss, with B_crit about B_simple; if one rank already trained at the best step size, env
steps (the replayed transitions per env step stay the same under batch) would grow by (1 + N b / B) / (1 + b / B),
past a ratio r from

    N_r = r + (r - 1) B / b        (r = 1.25: N = 1.25 + B / 4b),

a lower bound wherever one rank's step size is below the fastest that learns.

Both norms are estimated without bias from two batch sizes (their Appendix A.1): for each round, k minibatches
of b transitions are drawn from the run's replay memory as the trainer draws them (prioritised, with the
importance weights, where the run is); with |G_b|^2 the mean squared norm of their k gradients and |G_kb|^2 that
of their mean (the gradient of all kb transitions),

    |G|^2 = (kb |G_kb|^2 - b |G_b|^2) / (kb - b),     tr(Sigma) = (|G_b|^2 - |G_kb|^2) / (1/b - 1/kb),

averaged over the rounds separately before their ratio is taken (a ratio of noisy means, as the paper does).
The loss is the run's own TD loss against its own target network, at the weights of each checkpoint; it is
measured from the first rank's memory and network, one process, no Horovod. DQN's loss moves as it learns, so
the noise scale is reported at every checkpoint the run kept (the paper saw it grow during training).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
from typing import Callable, List, Optional, Sequence

import numpy as np

from hvd_dqn.rank_split import learns_from_replay

PROGRAM = "hvd_dqn.plan.noise_scale"


class NoiseScaleError(Exception):
    """A logdir or setting the measurement cannot use; the message names it and says why."""


@dataclasses.dataclass
class NoiseEstimate:
    """Unbiased estimates of |G|^2 (the true gradient's squared norm) and tr(Sigma) (the trace of one
    transition's gradient covariance). Either may come out negative in a single round: noise."""
    gradient_sq: float
    trace: float

    @property
    def simple(self) -> float:
        """B_simple = tr(Sigma) / |G|^2, in transitions; infinite where |G|^2 is lost in the noise."""
        return self.trace / self.gradient_sq if self.gradient_sq > 0 else math.inf


def estimate(small_sq_norms: Sequence[float], big_sq_norm: float, small: int, big: int) -> NoiseEstimate:
    """One round: the squared norms of gradients on batches of `small` transitions, and that of a gradient on
    `big` transitions (McCandlish et al. 2018, Appendix A.1: E|G_B|^2 = |G|^2 + tr(Sigma) / B)."""
    if not 0 < small < big:
        raise ValueError(f"batch sizes {small} and {big}: need 0 < small < big")
    small_sq = float(np.mean(small_sq_norms))
    return NoiseEstimate(gradient_sq=(big * big_sq_norm - small * small_sq) / (big - small),
                         trace=(small_sq - big_sq_norm) / (1.0 / small - 1.0 / big))


def combine(estimates: Sequence[NoiseEstimate]) -> NoiseEstimate:
    """The rounds' |G|^2 and tr(Sigma) averaged separately (a ratio of means, not a mean of ratios, which the
    rounds whose |G|^2 lands near zero would dominate)."""
    return NoiseEstimate(statistics.fmean(e.gradient_sq for e in estimates),
                         statistics.fmean(e.trace for e in estimates))


def measure(gradient: Callable[[object], np.ndarray], draw: Callable[[], object], batch_size: int,
            batches_per_round: int, rounds: int) -> List[NoiseEstimate]:
    """`rounds` estimates, each from the gradients of `batches_per_round` minibatches of `batch_size` from `draw`."""
    if batches_per_round < 2 or rounds < 1:
        raise ValueError("need at least 2 batches per round and 1 round")
    results = []
    for _ in range(rounds):
        gradients = [gradient(draw()) for _ in range(batches_per_round)]
        small_sq = [float(g @ g) for g in gradients]
        big = np.mean(gradients, axis=0)
        results.append(estimate(small_sq, float(big @ big), batch_size, batch_size * batches_per_round))
    return results


def env_steps_ratio(ranks: int, rank_batch: int, noise_scale: float) -> float:
    """Env steps to a score at `ranks` ranks over one rank's, under --rank_scaling=batch (global batch ranks x
    `rank_batch`), by the empirical model's E = E_min (1 + B / B_crit) with B_crit = `noise_scale`."""
    if math.isinf(noise_scale):
        return 1.0
    return (1 + ranks * rank_batch / noise_scale) / (1 + rank_batch / noise_scale)


def ranks_at_ratio(rank_batch: int, noise_scale: float, ratio: float = 1.25) -> float:
    """The rank count at which `env_steps_ratio` reaches `ratio`: ratio + (ratio - 1) B / b."""
    return ratio + (ratio - 1) * noise_scale / rank_batch


# --- measuring a run's checkpoints ------------------------------------------------------------------------------
class CheckpointGradients:
    """A run's learner and first rank's replay memory, built once from its config and loaded from each of its
    checkpoints (written with --checkpoint_replay) in turn."""

    def __init__(self, config, world_size: int):
        from hvd_dqn.agent.factory import replay_learner, replay_memory
        from hvd_dqn.agent.schedules import LinearSchedule
        from hvd_dqn.envs import probe_spec
        from hvd_dqn.rank_split import rank_share

        self.config = config
        self.rank_batch = rank_batch_size(config, world_size)
        spec = probe_spec(config)
        num_envs, capacity = rank_share(config, world_size)
        self.learner = replay_learner(config, spec, world_size, distributed=False)
        self.replay = replay_memory(config, spec, num_envs, capacity)
        self.priority_beta = LinearSchedule(config.priority_beta_start, config.priority_beta_end,
                                            config.total_env_steps)

    def measure(self, path: str, batches_per_round: int, rounds: int, seed: int, batch_size: Optional[int] = None
                ) -> dict:
        """The noise scale at checkpoint `path`, in both geometries (see `preconditioner`), from minibatches of
        `batch_size` (default: one rank's --batch_size) drawn from its first rank's memory."""
        from hvd_dqn.logdir import checkpoint

        shard = checkpoint.replay_shard_path(path, 0)
        if not os.path.exists(shard):
            raise NoiseScaleError(f"{path} holds no replay memory: train with --checkpoint_replay so that each "
                                  "checkpoint keeps the transitions the gradients are measured on")
        try:
            counters = checkpoint.restore(path, self.learner.checkpoint_items())
            self.replay.load(shard)
        except Exception as error:  # TensorFlow and NumPy report damaged files with several error types
            raise NoiseScaleError(f"{path} does not load ({checkpoint.first_line(error)})") from None
        batch_size = batch_size or self.rank_batch
        if len(self.replay) < batch_size:
            raise NoiseScaleError(f"{path}: its memory holds {len(self.replay):,} transitions, fewer than a batch of "
                                  f"{batch_size}")
        beta, rng = self.priority_beta(counters["env_steps"]), np.random.default_rng(seed)
        gradients = []  # the same minibatches' gradients for both geometries

        def gradient(batch):
            gradients.append(self.learner.loss_gradient(batch))
            return gradients[-1]
        plain = measure(gradient, lambda: self.replay.sample(batch_size, rng, beta), batch_size, batches_per_round,
                        rounds)
        scale = np.sqrt(preconditioner(self.learner.optimizer, self.learner.online.trainable_variables))
        rounds_preconditioned = measure(lambda g: g * scale, iter(gradients).__next__, batch_size, batches_per_round,
                                        rounds)
        overall, preconditioned = combine(plain), combine(rounds_preconditioned)
        return {"checkpoint": os.path.basename(path), "env_steps": int(counters["env_steps"]),
                "updates": int(counters.get("updates", 0)), "transitions_in_memory": len(self.replay),
                "batch_size": batch_size, "rank_batch": self.rank_batch, "gradient_sq": overall.gradient_sq,
                "trace": overall.trace, "noise_scale": overall.simple,
                "noise_scale_preconditioned": preconditioned.simple,
                "rounds": [dataclasses.asdict(e) for e in plain],
                "rounds_preconditioned": [dataclasses.asdict(e) for e in rounds_preconditioned]}


def preconditioner(optimizer, variables) -> np.ndarray:
    """The diagonal P by which the run's optimizer divides the gradient at its current state, flattened as
    `loss_gradient` flattens (up to a constant factor, which the noise scale does not see): Keras' Adam
    1 / (sqrt(v) + eps), RAdam 1 / (sqrt(v / (1 - beta_2^t)) + eps), RMSprop 1 / (sqrt(v - m^2) + eps) (centred)
    or 1 / (sqrt(v) + eps). The noise scale in that geometry, tr(P Sigma) / G'PG, is the one an adaptive
    optimizer sees; its critical batch is larger than SGD's where the gradient's noise lies along directions it
    scales down (Zhang et al. 2019, "Which Algorithmic Choices Matter at Which Batch Sizes?", arXiv:1907.04164,
    measured Adam's critical batch sizes well above SGD with momentum's)."""
    from hvd_dqn.agent.optimizers import RectifiedAdam, RootEpsilonRMSprop

    parts = []
    for variable in variables:
        index = optimizer._index_dict[optimizer._var_key(variable)]  # Keras 2.11+ keeps the slots by index
        second_moment = optimizer._velocities[index].numpy().astype(np.float64)
        if isinstance(optimizer, RootEpsilonRMSprop) and optimizer.centered:
            average = optimizer._average_gradients[index].numpy().astype(np.float64)
            second_moment = np.maximum(second_moment - average ** 2, 0.0)
        elif isinstance(optimizer, RectifiedAdam):
            second_moment = second_moment / (1 - float(optimizer.beta_2) ** max(int(optimizer.iterations.numpy()), 1))
        parts.append(np.ravel(1.0 / (np.sqrt(second_moment) + float(optimizer.epsilon))))
    return np.concatenate(parts)


def rank_batch_size(config, world_size: int) -> int:
    """A rank's transitions per update: --batch_size under --rank_scaling=batch, its 1/N share under updates."""
    return config.batch_size // world_size if config.rank_scaling == "updates" else config.batch_size


def summarise(measurements: List[dict], ratios=(1.25, 1.5)) -> dict:
    """The median noise scale over the checkpoints in each geometry; the ranks whose global batch still stays
    within the optimizer's own figure; and the rank counts the empirical model gives for each ratio of env
    steps if one rank's step size were already the fastest that learns (a lower bound: see `report`)."""
    median = statistics.median(m["noise_scale_preconditioned"] for m in measurements)
    rank_batch = measurements[0]["rank_batch"]
    return {"median_noise_scale": statistics.median(m["noise_scale"] for m in measurements),
            "median_noise_scale_preconditioned": median, "rank_batch": rank_batch,
            "ranks_within_noise_scale": median / rank_batch,
            "ranks_at_ratio": {str(r): ranks_at_ratio(rank_batch, median, r) for r in ratios}}


def report(logdir: str, config, measurements: List[dict], summary: dict) -> str:
    b, name = summary["rank_batch"], f"B_{config.optimizer}"
    lines = [f"{logdir}: {config.env_id}, gradient noise scale at each checkpoint in transitions (a rank's batch "
             f"b = {b}): B_simple = tr(Sigma)/|G|^2, and {name} in the {config.optimizer} optimizer's own geometry",
             f"  {'env steps':>10} {'updates':>9} {'|G|^2':>10} {'tr(Sigma)':>10} {'B_simple':>9} {name:>10} "
             f"{name + '/b':>12}"]
    for m in measurements:
        lines.append(f"  {m['env_steps']:>10,} {m['updates']:>9,} {m['gradient_sq']:>10.4g} {m['trace']:>10.4g} "
                     f"{m['noise_scale']:>9.4g} {m['noise_scale_preconditioned']:>10.4g} "
                     f"{m['noise_scale_preconditioned'] / b:>12.2f}")
    median = summary["median_noise_scale_preconditioned"]
    lines.append(f"median over the checkpoints: B_simple {summary['median_noise_scale']:.4g}, {name} {median:.4g} "
                 f"({median / b:.2f} rank batches).")
    if config.rank_scaling == "updates":
        lines.append("--rank_scaling=updates keeps the global batch at --batch_size at any N: the noise scale "
                     "predicts no growth of env steps with the ranks.")
        return "\n".join(lines)
    at = summary["ranks_at_ratio"]
    lines += [
        f"Under --rank_scaling=batch the global batch is N x {b}. Beyond N = {max(median / b, 1.0):.1f} rank(s) it "
        f"exceeds {name} and buys no better gradient: the N times fewer updates are then made up for by the step size "
        "alone (x N by the linear rule), and env steps hold as long as the preset's step size can rise that far. "
        "python -m hvd_dqn.plan.step_headroom measures that headroom on one rank in 1/k of the updates "
        "(docs/scaling.md, \"How far the ranks can go\").",
        f"If one rank's step size were already the fastest that learns, the empirical model would put env steps at "
        f"1.25x one rank's from N = {at['1.25']:.1f} on and 1.5x from N = {at['1.5']:.1f} (a lower bound)."]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n\n")[0])
    parser.add_argument("logdir", help="A DQN run's logdir whose checkpoints were written with --checkpoint_replay.")
    parser.add_argument("--rounds", type=int, default=20, help="Estimates averaged per checkpoint (default 20).")
    parser.add_argument("--batches_per_round", type=int, default=16,
                        help="k: minibatches per round; the large batch is k times a rank's (default 16).")
    parser.add_argument("--batch_size", type=int, default=None,
                        help="Transitions per small batch (default: a rank's batch of the run).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the minibatch draws.")
    parser.add_argument("--json", default=None, help="Write every checkpoint's figures and the summary here.")
    args = parser.parse_args(argv)
    try:
        measurements, config = measure_run(args)
    except NoiseScaleError as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return 2
    summary = summarise(measurements)
    print(report(args.logdir, config, measurements, summary))
    if args.json:
        try:
            with open(args.json, "w") as handle:
                json.dump({"logdir": args.logdir, "env_id": config.env_id, "method": "McCandlish et al. 2018, "
                           "arXiv:1812.06162, Appendix A.1", "batches_per_round": args.batches_per_round,
                           "rounds": args.rounds, "seed": args.seed, "summary": summary,
                           "checkpoints": measurements}, handle, indent=1)
                handle.write("\n")
        except OSError as error:
            print(f"{PROGRAM}: error: --json={args.json}: cannot write ({error.strerror})", file=sys.stderr)
            return 2
    return 0


def measure_run(args):
    """(every checkpoint's measurement, the run's config) for the command line's logdir; NoiseScaleError for a
    setting or logdir it cannot use."""
    from hvd_dqn.agent.configs import config_from_json
    from hvd_dqn.logdir import checkpoint

    if args.rounds < 1 or args.batches_per_round < 2 or (args.batch_size is not None and args.batch_size < 1):
        raise NoiseScaleError(f"--rounds={args.rounds} --batches_per_round={args.batches_per_round} "
                              f"--batch_size={args.batch_size}: need at least 1 round, 2 batches per round and a "
                              "positive batch")
    if not os.path.isdir(args.logdir):
        raise NoiseScaleError(f"{args.logdir}: no such folder")
    paths = checkpoint.complete_checkpoints(args.logdir)
    if not paths:
        raise NoiseScaleError(f"{args.logdir}: no complete checkpoint; train with --checkpoint_replay "
                              "--checkpoint_interval_env_steps=... into it first (see --help)")
    try:
        config = config_from_json(checkpoint.read_config_json(paths[-1]))
    except (OSError, ValueError, TypeError) as error:
        raise NoiseScaleError(f"{paths[-1]}: its config.json is unreadable ({error})") from None
    if not learns_from_replay(config):
        raise NoiseScaleError(f"{args.logdir}: an --agent=pqn run; the noise scale is measured on DQN's "
                              "replayed minibatches (PQN's minibatch does not grow with the ranks)")
    counters = checkpoint.read_counters(paths[-1])
    world_size = int(counters.get("world_size") or len(counters.get("rank_states") or []) or 1)
    gradients = CheckpointGradients(config, world_size)
    return [gradients.measure(path, args.batches_per_round, args.rounds, args.seed, args.batch_size)
            for path in paths], config


if __name__ == "__main__":
    sys.exit(main())
