"""Training images per instance family: the newest PyTorch training image the pinned SageMaker SDK
resolves whose CUDA still supports the instance's GPU.

The rule: instance family -> GPU architecture -> newest CUDA that architecture runs -> newest image.

1. Family -> GPU architecture (``GPU_ARCHITECTURES``): the GPU of each SageMaker training family
   (Amazon EC2 accelerated-computing instance types; SageMaker ml.<family> runs on the same hardware).
2. Architecture -> newest CUDA it runs (``MAX_CUDA_MAJOR``):
   - CUDA 13.0 removed offline compilation and library support for Maxwell, Pascal and Volta
     (NVIDIA CUDA 13.0 release notes, "Deprecated Architectures":
     https://docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/index.html); CUDA 12.0 had
     already removed Kepler. So Volta (V100: ml.p3.*, ml.p3dn.*) needs a CUDA 12.x image and Kepler
     (K80: ml.p2.*) has no image the SDK resolves for PyTorch >= 2.6.
   - PyTorch's CUDA 13.0 wheels are built for Turing (7.5) and newer; its CUDA 12.8/12.9 wheels of the
     2.8-2.10 releases still carry sm_70 (pytorch/pytorch .ci/manywheel/build_cuda.sh, issue #157517;
     Volta leaves the 12.8 wheels with 2.11, issue #172352). The DLC images install those wheels
     (aws/deep-learning-containers pytorch/training/docker/2.8/py3/cu129/Dockerfile.gpu:
     ``--index-url https://download.pytorch.org/whl/cu129``).
3. Image: every PyTorch training image in the SDK's bundled config (``sagemaker-core`` image_uri_config:
   ``pytorch.json`` "training" = the Ubuntu ``pytorch-training`` family, tags without the CUDA version;
   ``pytorch-amzn2023.json`` "training" = the Amazon Linux 2023 ``pytorch`` family, whose tag carries it,
   e.g. ``2.14-cu133-amzn2023-sagemaker``), with its CUDA version; the newest whose CUDA major the
   architecture runs wins. The Ubuntu family's CUDA comes from the DLC buildspecs
   (``LEGACY_DLC_CUDA``: aws/deep-learning-containers pytorch/training/buildspec-2-<minor>-sm.yml,
   ``cuda_version``); a test fails when the SDK lists a version that table does not know.

With sagemaker-core 2.27.0 this gives: Turing and newer (g4dn, g5, g6, g6e, p4d, p4de, p5, p5e, p5en,
p6) -> ``pytorch:2.14-cu133-amzn2023-sagemaker``; Volta (p3, p3dn) -> ``pytorch-training:2.8.0-gpu-py312``
(CUDA 12.9); CPU -> ``pytorch:2.14-cpu-amzn2023-sagemaker``.

Support windows (AWS DLC framework support policy,
https://aws.github.io/deep-learning-containers/reference/support_policy): the AL2023 images from 2.11
are the maintained line; PyTorch 2.8 reached end of patch on 2026-08-06, and every image that still
carries Volta kernels is older. **No maintained image runs on V100**: ml.p3 jobs get the newest image
that works there (2.8.0), out of patch; move to ml.g4dn/ml.g5 or newer for a maintained image.
The AL2023 ``*-sagemaker`` images bundle the sagemaker-pytorch-training toolkit (script mode:
``sagemaker_program`` / ``sagemaker_submit_directory``), like the Ubuntu ones
(aws/deep-learning-containers docs, "Amazon SageMaker AI Deployment").

Synthesis uses these; ``trainingImage`` / ``trainingImageCpu`` context settings replace them.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

# GPU architecture per SageMaker training family (the ml. prefix dropped). Sources: Amazon EC2
# accelerated computing instance specifications (https://aws.amazon.com/ec2/instance-types/#Accelerated_Computing).
GPU_ARCHITECTURES: dict[str, str] = {
    "p2": "kepler",                                     # NVIDIA K80, sm_37
    "p3": "volta", "p3dn": "volta",                     # NVIDIA V100, sm_70
    "g4dn": "turing",                                   # NVIDIA T4, sm_75
    "p4d": "ampere", "p4de": "ampere",                  # NVIDIA A100, sm_80
    "g5": "ampere", "g5n": "ampere",                    # NVIDIA A10G, sm_86
    "g6": "ada", "g6e": "ada", "gr6": "ada",            # NVIDIA L4 / L40S, sm_89
    "p5": "hopper", "p5e": "hopper", "p5en": "hopper",  # NVIDIA H100 / H200, sm_90
    "p6-b200": "blackwell", "p6-b300": "blackwell",     # NVIDIA B200 / B300, sm_100
    "g7e": "blackwell",                                 # NVIDIA RTX PRO 6000 Blackwell, sm_120
}
# Newest CUDA major each architecture runs (None: no limit known). See the module docstring.
MAX_CUDA_MAJOR: dict[str, int | None] = {
    "kepler": 11, "volta": 12,
    "turing": None, "ampere": None, "ada": None, "hopper": None, "blackwell": None,
}
# Families whose accelerator is AWS Trainium/Inferentia (Neuron SDK), not CUDA: no image here serves them.
NON_CUDA_FAMILIES = ("trn1", "trn1n", "trn2", "inf1", "inf2")
# CUDA of the Ubuntu pytorch-training images (the SDK's tags do not carry it): DLC buildspecs'
# cuda_version (aws/deep-learning-containers pytorch/training/buildspec-2-<minor>-sm.yml).
LEGACY_DLC_CUDA: dict[str, tuple[int, int]] = {
    "2.6.0": (12, 6), "2.7.1": (12, 8), "2.8.0": (12, 9), "2.9.0": (13, 0), "2.10.0": (13, 0),
}
OLDEST_CONSIDERED = (2, 6)  # older images are years out of patch: never chosen

CPU_INSTANCE_FOR_LOOKUP = "ml.m5.xlarge"
GPU_INSTANCE_FOR_LOOKUP = "ml.g5.xlarge"  # any GPU type: the SDK only needs the processor kind


class ImageError(ValueError):
    """No image fits; the message names the setting or instance type and what to do."""


@dataclass(frozen=True)
class Candidate:
    framework: str               # SDK framework key: "pytorch" or "pytorch-amzn2023"
    version: str                 # as the SDK config spells it
    py_version: str | None
    cuda: tuple[int, int]

    @property
    def order(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))


ECR_URI_RE = re.compile(r"^(\d{12})\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/")


@dataclass(frozen=True)
class TrainingImages:
    """What the stacks hand to the Plan function: a default GPU and CPU image and, per instance
    family that must not use the default GPU image, its own image ("" = none fits: Plan refuses)."""
    gpu: str
    cpu: str
    by_family: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def for_instance(self, instance_type: str) -> str:
        family = instance_family(instance_type)
        if family in self.by_family:
            return self.by_family[family]
        return self.gpu if is_accelerated(family) else self.cpu

    def by_family_json(self) -> str:
        return json.dumps(self.by_family, sort_keys=True, separators=(",", ":"))

    def registry_accounts(self) -> list[str]:
        """The ECR accounts the images live in: 763104351884 in most regions, another account in about
        twenty (af-south-1: 626614931356, me-south-1: 217643126080, ...; the SDK's image_uri_config
        registries), or the operator's own for a trainingImage setting. The training role pulls from these."""
        uris = [self.gpu, self.cpu, *self.by_family.values()]
        return sorted({found.group(1) for uri in uris if (found := ECR_URI_RE.match(uri or ""))})


def instance_family(instance_type: str) -> str:
    parts = instance_type.split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "ml" else ""


def is_accelerated(family: str) -> bool:
    return family in GPU_ARCHITECTURES or family[:1] in ("p", "g") or family.startswith(("trn", "inf"))


def _sdk_config_dir() -> Path:
    import sagemaker.core  # heavy: only when images are resolved
    return Path(sagemaker.core.__file__).with_name("image_uri_config")


def _cuda_from_tag(text: str) -> tuple[int, int] | None:
    found = re.search(r"cu(\d{2})(\d)", text)
    return (int(found.group(1)), int(found.group(2))) if found else None


@functools.lru_cache(maxsize=None)
def candidates() -> tuple[Candidate, ...]:
    """Every PyTorch training image of the pinned SDK (>= 2.6), with its CUDA version."""
    config_dir = _sdk_config_dir()
    found: list[Candidate] = []
    legacy = json.loads((config_dir / "pytorch.json").read_text())["training"]["versions"]
    for version, entry in legacy.items():
        if tuple(int(p) for p in version.split("."))[:2] < OLDEST_CONSIDERED:
            continue
        if version not in LEGACY_DLC_CUDA:
            raise ImageError(f"sagemaker-core lists PyTorch training {version} whose CUDA version dslab/aws/images.py "
                             "does not know: add it to LEGACY_DLC_CUDA from the DLC buildspec")
        found.append(Candidate("pytorch", version, entry["py_versions"][-1], LEGACY_DLC_CUDA[version]))
    al2023 = json.loads((config_dir / "pytorch-amzn2023.json").read_text())["training"]["versions"]
    for version, entry in al2023.items():
        cuda = _cuda_from_tag(entry["container_version"]["gpu"])
        if cuda is None:
            raise ImageError(f"sagemaker-core's pytorch-amzn2023 {version} GPU tag has no CUDA version")
        found.append(Candidate("pytorch-amzn2023", version, None, cuda))
    return tuple(sorted(found, key=lambda c: c.order))


def _uri(candidate: Candidate, region: str, processor: str) -> str | None:
    """The image's URI in ``region``, or None where the SDK knows no registry for it there."""
    from sagemaker.core import image_uris
    instance = GPU_INSTANCE_FOR_LOOKUP if processor == "gpu" else CPU_INSTANCE_FOR_LOOKUP
    kwargs = {"py_version": candidate.py_version} if candidate.py_version else {}
    try:
        return image_uris.retrieve(candidate.framework, region=region, version=candidate.version,
                                   instance_type=instance, image_scope="training", **kwargs)
    except ValueError:  # "Unsupported region: ..."
        return None


def newest_for(architecture: str | None, region: str, processor: str = "gpu") -> tuple[Candidate, str] | None:
    """The newest image (and its URI) for a GPU architecture (None: any) that the SDK resolves in ``region``."""
    limit = MAX_CUDA_MAJOR[architecture] if architecture else None
    for candidate in reversed(candidates()):
        if limit is not None and candidate.cuda[0] > limit:
            continue
        uri = _uri(candidate, region, processor)
        if uri:
            return candidate, uri
    return None


# Resolving the images imports the SDK and walks its registry (~5 s, each synthesis): the answer is a
# function of the pinned sagemaker-core, this module's rules and the region, so it is kept on disk by those.
IMAGE_CACHE = Path(__file__).resolve().parents[2] / "build" / "image-cache"


@functools.lru_cache(maxsize=None)
def training_images(region: str) -> TrainingImages:
    """The default GPU and CPU images and the per-family exceptions for ``region``."""
    import hashlib
    import importlib.metadata
    key = hashlib.sha256("|".join((importlib.metadata.version("sagemaker-core"), region,
                                   Path(__file__).read_text())).encode()).hexdigest()[:24]
    cached = IMAGE_CACHE / f"{region}-{key}.json"
    if cached.exists():
        return TrainingImages(**json.loads(cached.read_text()))
    images = _resolve_training_images(region)
    try:
        IMAGE_CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(images.__dict__, sort_keys=True))
    except OSError:
        pass  # a read-only install resolves every time
    return images


def _resolve_training_images(region: str) -> TrainingImages:
    newest_gpu, newest_cpu = newest_for(None, region, "gpu"), newest_for(None, region, "cpu")
    if newest_gpu is None or newest_cpu is None:
        raise ImageError(f"the pinned SageMaker SDK knows no PyTorch training image (>= 2.6) in region {region}: "
                         "set -c trainingImage=<ECR URI> -c trainingImageCpu=<ECR URI>")
    by_family: dict[str, str] = {}
    notes: dict[str, str] = {}
    for family, architecture in sorted(GPU_ARCHITECTURES.items()):
        best = newest_for(architecture, region)
        limit = MAX_CUDA_MAJOR[architecture]
        if best is None:
            by_family[family] = ""
            notes[family] = f"ml.{family} ({architecture}) runs CUDA {limit} at most: no PyTorch training image >= 2.6 supports it"
        elif best[1] != newest_gpu[1]:
            by_family[family] = best[1]
            notes[family] = (f"ml.{family} ({architecture}) runs CUDA {limit}.x at most: "
                             f"PyTorch {best[0].version} (CUDA {best[0].cuda[0]}.{best[0].cuda[1]})")
    for family in NON_CUDA_FAMILIES:
        by_family[family] = ""
        notes[family] = f"ml.{family} runs AWS Neuron, not CUDA: no PyTorch CUDA image runs there"
    return TrainingImages(gpu=newest_gpu[1], cpu=newest_cpu[1], by_family=by_family, notes=notes)


def lab_training_images(region: str, gpu_override: str | None = None, cpu_override: str | None = None) -> TrainingImages:
    """What the stacks deploy: the rule's images, or the ``trainingImage`` / ``trainingImageCpu`` settings.

    A ``trainingImage`` setting serves every GPU job (no per-family exceptions: the operator chose it).
    """
    if gpu_override and cpu_override:
        return TrainingImages(gpu=gpu_override, cpu=cpu_override)
    rule = training_images(region)
    if gpu_override:
        return TrainingImages(gpu=gpu_override, cpu=cpu_override or rule.cpu)
    return TrainingImages(gpu=rule.gpu, cpu=cpu_override or rule.cpu, by_family=dict(rule.by_family), notes=dict(rule.notes))
