"""One rank's part of a training job: Horovod set-up and collectives, the loop (`trainer`), its acting and
learning sides and the pipeline between them, progress and stop signals, metrics, saving and resuming,
and elastic training."""
