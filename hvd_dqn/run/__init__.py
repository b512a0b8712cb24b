"""One rank's part of a training job, whatever its agent: Horovod set-up and collectives (`distributed`), the loop
(`trainer`), acting (`acting`) and the pipeline that runs it ahead of learning (`pipeline`), progress, stop rules
and signals, metrics, the memory pre-flight, saving and resuming, elastic training, and ranks started by Ray or
Spark (`ray_or_spark_rank`)."""
