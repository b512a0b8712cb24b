"""The job's progress as a checkpoint keeps it, and the clock in which time to a score is measured."""
from hvd_dqn.run import progress
from hvd_dqn.run.progress import Counters, TrainingClock


class FakeTime:
    def __init__(self):
        self.now = 100.0

    def monotonic(self):
        return self.now


def test_the_training_clock_runs_only_between_start_and_stop_and_goes_on_after_a_resume(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(progress, "time", fake)
    clock = TrainingClock()
    fake.now += 5  # start-up: not training
    assert clock.seconds() == 0.0
    clock.start()
    fake.now += 7
    clock.start()  # entered again (elastic): keeps running from the first start
    fake.now += 3
    assert clock.seconds() == 10.0
    clock.stop()
    fake.now += 50
    assert clock.seconds() == 10.0
    resumed = TrainingClock(Counters.from_saved({"wall_s": clock.seconds()}).wall_s)
    fake.now += 20  # the resumed job's start-up
    resumed.start()
    fake.now += 2.5
    assert resumed.seconds() == 12.5


def test_counters_read_back_from_a_checkpoint_keep_their_types_and_default_what_is_missing():
    saved = {"env_steps": 4000, "episodes": 7, "updates": 1500, "recent_returns": [1, 2.5], "wall_s": 12.25,
             "world_size": 2}
    assert Counters.from_saved(saved) == Counters(env_steps=4000, episodes=7, updates=1500,
                                                  recent_returns=[1.0, 2.5], wall_s=12.25)
    # A checkpoint written before the clock existed: its run's time is unknown, counted from the resume on.
    assert Counters.from_saved({"env_steps": 10}) == Counters(env_steps=10)
