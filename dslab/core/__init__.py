"""The domain core: experiments, planning, request building, results, prices, estimates.

Pure Python (standard library only) so the very same code runs in the CLI, in the workflow's
Lambda functions (whose runtime has only the standard library and boto3) and in the local lab.
No CDK, no AWS calls, no file I/O here.
"""
