"""What prepares a run's inputs: datasets (generate, pack, replicate, import, stats, upload), the training
code's byte-reproducible packaging, users' own scripts, and experiment files."""
