"""The domain core: what a question is, what AWS's numbers are, what the model estimates, and the one answer.

Layers, each importing only those under it (pyproject.toml's import-linter contract, checked by `make test`):

- ``requests``, ``results``, ``quotas``, ``deploy_guard``, ``job_metrics``, ``progress``: what builds on the answer
  (the training-job requests, the results records, the deploy's checks);
- ``answer/``: the premise, the provisioning each source is priced on, the decision, and ``Answer``, computed once;
- ``experiment/``: the experiment file's model and its parsing;
- ``model/``: the estimates (a job's seconds and dollars, a checkpoint's), their calibration and ranges;
- ``workloads/``: MLPerf Storage's DLIO workload files, for data and for checkpoints;
- ``facts/``: AWS's numbers with their sources (instances, prices, limits, storage, compute rates), no logic above them;
- ``shape``, ``modes``, ``errors``: the words everything uses.

Pure Python (standard library only) so the very same code runs in the CLI, in the workflow's Lambda functions
(whose runtime has only the standard library and boto3) and in the local lab. No CDK, no AWS calls, no file I/O.
"""
