"""MLPerf Storage's DLIO workload files, as published: a training workload's dataset and compute, a checkpointing
workload's model and the files each rank writes."""
