"""Lambda handlers of the benchmark workflow (Plan, Collect): thin adapters over dslab.core."""
