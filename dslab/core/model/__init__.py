"""The estimates: one training job's seconds and dollars on a named lab (``estimate``), their calibration and ranges,
the instance's storage, the lab's provisioning, and a checkpoint's save, stall and restore per target."""
