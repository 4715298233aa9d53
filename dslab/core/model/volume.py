"""Storage on the instance: the EBS volume a job asks for, or NVMe instance storage of fixed size, and whether File
mode's share of the dataset fits it. Standard library only, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..facts.instances import instance_storage_gb

# The training volume every job gets when File mode needs no more (model artifacts, scratch space): what the
# experiment files have always asked for. File mode's jobs ask for what their share of the data needs
# (``volume_for``); instances with NVMe instance storage get their fixed capacity whatever is asked.
DEFAULT_VOLUME_GB = 100


# A file needs this much room beyond its bytes on a volume (file system overhead, the download's temporaries).
VOLUME_HEADROOM = 1.05


def file_share_bytes(total_bytes: int, hosts: int, sharded: bool) -> float:
    """What File mode copies onto each instance: its 1/N of the objects (ShardedByS3Key) or all of them."""
    return total_bytes / max(1, hosts) if sharded else float(total_bytes)


def volume_needed_gb(share_bytes: float) -> int:
    return max(1, math.ceil(share_bytes / 1e9 * VOLUME_HEADROOM))


@dataclass(frozen=True)
class Volume:
    """The storage a job's instances get, and whether File mode's share fits it.

    "When using an ML instance with NVMe SSD volumes, SageMaker doesn't provision Amazon EBS General Purpose SSD
    (gp2) storage. Available storage is fixed to the NVMe-type instance's storage capacity ... For example, ML
    instance families with the NVMe-type instance storage include ml.p4d, ml.g4dn, and ml.g5" (CreateTrainingJob,
    ResourceConfig.VolumeSizeInGB; botocore's SageMaker model). So on those types the capacity is the instance's
    own and no volume size is asked for or priced; on EBS types the job asks VolumeSizeInGB of gp2."""
    gb: int                 # what the job has: NVMe capacity, or the EBS volume
    nvme: bool
    asked_gb: int | None    # what the user asked for (None: sized for the data); on EBS it is not raised for them
    needed_gb: int = 0      # File mode: what its share needs (0: not File)

    @property
    def asked(self) -> bool:
        return self.asked_gb is not None

    @property
    def fits(self) -> bool:
        return self.needed_gb <= self.gb

    @property
    def request_gb(self) -> int:
        """What the request asks for in VolumeSizeInGB: on NVMe types, what was asked or the default (SageMaker
        provisions no EBS there whatever it says); on EBS types, the volume itself."""
        if self.nvme:
            return self.asked_gb if self.asked_gb is not None else DEFAULT_VOLUME_GB
        return self.gb

    @property
    def priced_gb(self) -> int:
        """EBS gigabytes billed per instance (none on NVMe types: SageMaker provisions no EBS there)."""
        return 0 if self.nvme else self.gb

    def problem(self, field: str = "volume_size_gb") -> str | None:
        if self.fits:
            return None
        if self.nvme:
            return (f"File mode copies {self.needed_gb:,} GB onto each instance, more than its {self.gb:,} GB of NVMe "
                    "instance storage (fixed: SageMaker provisions no EBS volume on NVMe types); more instances "
                    "(ShardedByS3Key shares the objects among them), or FastFile/FSx")
        return (f"File mode copies {self.needed_gb:,} GB onto each instance, more than the {self.gb:,} GB volume asked "
                f"for: raise {field} to at least {self.needed_gb:,} (or leave it out: it is then sized for the data)")

    def describe(self) -> str:
        if self.nvme:
            return f"{self.gb:,} GB of NVMe instance storage (fixed)"
        how = "asked for" if self.asked else ("sized for File's share" if self.gb > DEFAULT_VOLUME_GB else "the default")
        return f"a {self.gb:,} GB EBS volume ({how})"


def volume_for(instance_type: str, asked_gb: int | None, share_bytes: float | None = None) -> Volume:
    """The storage a job gets: NVMe types their capacity; EBS types the size asked for, or, when none is asked,
    the default raised to what File mode's ``share_bytes`` needs (what the request asks SageMaker for)."""
    needed = volume_needed_gb(share_bytes) if share_bytes else 0
    nvme = instance_storage_gb(instance_type)
    if nvme:
        return Volume(nvme, True, asked_gb, needed)
    if asked_gb is not None:
        return Volume(int(asked_gb), False, int(asked_gb), needed)
    return Volume(max(DEFAULT_VOLUME_GB, needed), False, None, needed)
