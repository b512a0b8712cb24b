"""When a run ends before its budget: evaluations that reached --stop_at_eval_return enough times in a row,
training episodes that reached --stop_at_train_return, or a signal to any rank. Every rule gives the same
answer on every rank (the counters and the gathered values are the job's), so the ranks stop together."""
from __future__ import annotations

import numpy as np
from absl import logging

from hvd_dqn import collectives
from hvd_dqn.config import TrainConfig
from hvd_dqn.run.metrics import episodes_as_played
from hvd_dqn.run.progress import STOP_POLL_ENV_STEPS_PER_RANK, Counters, StopSignals


class StopRules:
    def __init__(self, config: TrainConfig, signals: StopSignals):
        self.config = config
        self.signals = signals
        self.stopped_by = None  # the signal that ended the run early

    def evaluations_reached_target(self, counters: Counters, eval_return: float, is_chief: bool) -> bool:
        config = self.config
        at_target = config.stop_at_eval_return is not None and eval_return >= config.stop_at_eval_return
        counters.evaluations_at_target = counters.evaluations_at_target + 1 if at_target else 0
        stop = counters.evaluations_at_target >= config.stop_consecutive_evals
        if stop and is_chief:
            logging.info("%d evaluation(s) in a row reached --stop_at_eval_return=%s at %s env steps; stopping",
                         counters.evaluations_at_target, config.stop_at_eval_return, f"{counters.env_steps:,}")
        return stop

    def record_training_episodes(self, counters: Counters, episode_rows) -> None:
        """With --stop_at_train_return: keeps the returns of the job's latest --stop_train_episodes episodes
        (every rank's, as played) in the counters, which checkpoints and elastic commits carry."""
        if self.config.stop_at_train_return is None:
            return
        played = [float(episode[3]) for episode in episodes_as_played(episode_rows)]
        counters.recent_returns = (counters.recent_returns + played)[-self.config.stop_train_episodes:]

    def solved_in_training(self, counters: Counters, is_chief: bool) -> bool:
        """--stop_at_train_return: whether the latest --stop_train_episodes training episodes average at
        least the target."""
        config, recent = self.config, counters.recent_returns
        if config.stop_at_train_return is None or len(recent) < config.stop_train_episodes:
            return False
        mean = float(np.mean(recent))
        if mean < config.stop_at_train_return:
            return False
        if is_chief:
            logging.info("the last %d training episodes averaged %.1f >= --stop_at_train_return=%s at %s env steps; "
                         "stopping", len(recent), mean, config.stop_at_train_return, f"{counters.env_steps:,}")
        return True

    @staticmethod
    def poll_every(num_envs: int, iterations_per_cycle: int = 1) -> int:
        """Iterations between two signal polls: STOP_POLL_ENV_STEPS_PER_RANK of this rank's env steps; for an agent
        that learns once a cycle of several iterations (PQN: a rollout), once a cycle, whose updates are a longer
        wait than the poll's interval anyway, and a poll per few env steps (a collective each) would cost fast
        acting more than the rest of a step."""
        if iterations_per_cycle > 1:
            return iterations_per_cycle
        return max(1, -(-STOP_POLL_ENV_STEPS_PER_RANK // num_envs))

    def signal_to_any_rank(self, is_chief: bool) -> bool:
        """Collective: whether any rank received SIGTERM or SIGINT (one tiny allgather). When one did, a second
        gather, on this path alone, tells every rank what stopped the job and where, so rank 0's log names it
        ("SIGTERM (at rank 3)") instead of leaving the user to search the other ranks' output."""
        votes = collectives.gather_from_ranks(np.array([1.0 if self.signals.received else 0.0]), "stop_votes")
        if not votes.any():
            return False
        # A rank may receive its own signal between the two gathers; the ranks that voted have one either way.
        reasons = collectives.gather_objects(self.signals.received, "stop_reasons")
        first = next(rank for rank, reason in enumerate(reasons) if reason)
        self.stopped_by = self.signals.received or f"{reasons[first]} (at rank {first})"
        if is_chief:
            logging.info("received %s: finishing the steps under way, then writing a checkpoint", self.stopped_by)
        return True
