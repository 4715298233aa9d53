"""Training-image URIs, resolved the way the SageMaker Python SDK resolves them."""

from __future__ import annotations

import functools

DEFAULT_PYTORCH_VERSION = "2.6.0"
DEFAULT_PY_VERSION = "py312"


@functools.lru_cache(maxsize=None)
def pytorch_training_image(region: str, accelerator: str, version: str = DEFAULT_PYTORCH_VERSION,
                           py_version: str = DEFAULT_PY_VERSION) -> str:
    """The AWS PyTorch training container for ``region`` (``accelerator`` is "gpu" or "cpu").

    Uses ``sagemaker.core.image_uris`` (the SDK v3 resolver) so registry accounts per region stay right.
    """
    from sagemaker.core import image_uris  # heavy import: only when an image is resolved

    instance_type = "ml.p3.2xlarge" if accelerator == "gpu" else "ml.m5.xlarge"
    return image_uris.retrieve("pytorch", region=region, version=version, py_version=py_version,
                               instance_type=instance_type, image_scope="training")
