"""Munchausen DQN as one rank runs it: DQN's replay memory, schedule, network and acting (greedy on Q, as the
authors' agent interacts by default), with the Munchausen learner (`learner.MunchausenLearner`)."""
from __future__ import annotations

from hvd_dqn.agent.dqn.agent import DQNAgent
from hvd_dqn.agent.munchausen.learner import MunchausenLearner


class MunchausenDQNAgent(DQNAgent):
    """A rank's M-DQN: everything but the targets is DQN's (replay, n-step, prioritised replay, the target network's
    copies, acting ahead, drawing ahead, exact resume, --elastic)."""

    learner_class = MunchausenLearner
