"""The training side of DataSourceLab: what runs inside each SageMaker training job.

Standard library, numpy and Pillow only (torch/torchvision when present, for real training):
the job runs in an isolated subnet where nothing can be installed at start-up.
"""
