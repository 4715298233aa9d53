"""The benchmark workflow's Lambda functions (handlers.py: the entry points; one module per step), thin
adapters over dslab.core; standard library and boto3 only."""
