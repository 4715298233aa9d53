"""SageMaker training instances as they are: accelerators, network, local NVMe.

Every row names where its figures come from and when they were checked. The ml. types run on the EC2
type of the same name. Network is the headline figure (what AWS lists, "up to" for burstable
sizes); ``network_baseline_gbps`` is what such a size sustains once its burst credits are spent,
which is what a training run of hours gets (the sizing model uses it; the single-job estimate keeps
the headline figure its calibration was fitted with).

Sources (checked 2026-11-30, from stored copies of the pages; see the README's sizing section):
- EC2_AC: Amazon EC2 accelerated computing instance specifications, hardware and network tables
  (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html; archived source awsdocs/amazon-ec2-user-guide
  doc_source/accelerated-computing-instances.md at e3707c4, 2023-06-15, and at 5bcb1f4 for p3's network)
  and its instance-store table (doc_source/InstanceStorage.md).
- BATCH_GPU: AWS Batch User Guide, "Run GPU jobs" (GPUs, GPU memory, vCPUs, memory, network per type,
  https://docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html; read in its translated copies).
- KARPENTER_BW: aws/karpenter-provider-aws pkg/providers/instancetype/zz_generated.bandwidth.go (01a436f),
  the "Baseline bandwidth (Gbps)" column of the EC2 instance-type network specifications (docs.aws.amazon.com/
  ec2/latest/instancetypes/gp.html, co.html, ac.html) as its hack/code/bandwidth_gen reads them. Every row's
  sustained figure is checked against tests/data/ec2-baseline-bandwidth.csv, a copy of those figures.
- SECONDARY: third-party listings where no AWS page was at hand (marked in the row): treat as the best
  available figure, to be confirmed with `aws ec2 describe-instance-types --instance-types <type>`.
- NETWORK_CARDS_SOURCE: each type's network cards (DescribeInstanceTypes' NetworkInfo.NetworkCards, vendored in
  tests/data/ec2-network-cards.csv with its source). A training container's S3, NFS (EFS) and Lustre (FSx) traffic is
  IP traffic; on a type of several cards it is taken to use the primary card's bandwidth (IP_CARD_ASSUMPTION).
"""

from __future__ import annotations

from dataclasses import dataclass

CHECKED = "2026-11-30"
EC2_AC = "EC2 accelerated computing specifications (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html)"
BATCH_GPU = "AWS Batch 'Run GPU jobs' table (docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html)"
KARPENTER_BW = "EC2 baseline bandwidth as generated into aws/karpenter-provider-aws zz_generated.bandwidth.go"
SECONDARY = "secondary listings only (not on an AWS page at hand): confirm with aws ec2 describe-instance-types"
OWN_TABLE = "the lab's earlier instance table (vCPUs, network, NVMe), no accelerator"
NETWORK_CARDS_SOURCE = ("EC2 DescribeInstanceTypes NetworkInfo.NetworkCards, as getmoto/moto stores AWS's answer "
                        "(moto/ec2/resources/instance_types.json at 34d6cad, 2026-08-02; tests/data/ec2-network-cards.csv)")
# Types of more than one network card: (cards, the primary card's sustained Gbit/s). Every other type has one card,
# carrying the whole instance's figure. g6e.48xlarge's API answer repeats the instance's 400 on each of its 4 cards.
NETWORK_CARDS = {"p4d.24xlarge": (4, 100.0), "p4de.24xlarge": (4, 100.0), "p5.48xlarge": (32, 100.0),
                 "trn1.32xlarge": (8, 100.0), "g6e.48xlarge": (4, 400.0)}
# Not documented: which card a SageMaker training container's IP traffic uses. EC2 puts the primary (ENA) interface on
# card 0 and the EFA interfaces on every card; its P5 guide: "p5.48xlarge ... total network bandwidth capacity of
# 3,200 Gbps, of which up to 800 Gbps can be utilized for IP network traffic", and with one ENA interface "up to
# 100 Gbps of IP networking bandwidth" (EC2 User Guide, efa-acc-inst-types.html). The EFA aggregate carries NCCL's
# traffic between hosts, which no data source here uses.
IP_CARD_ASSUMPTION = ("S3, EFS and FSx traffic is IP traffic, which the lab takes to use the primary network card "
                      "(index 0, the ENA interface): {card:g} of the {total:g} Gbit/s of {name}'s {cards} cards (no "
                      "SageMaker page says which card a training container uses; EC2's P5 guide gives \"up to 100 Gbps "
                      "of IP networking bandwidth\" with one ENA interface; the EFA aggregate is NCCL's between hosts)")


@dataclass(frozen=True)
class Instance:
    name: str
    vcpus: int
    accelerators: int              # GPUs or Trainium chips per instance (0: CPU only)
    accelerator: str | None        # "V100 16GB", "A100 40GB", ...
    network_gbps: float            # headline figure ("up to" for burstable sizes)
    network_baseline_gbps: float   # sustained figure (the same where not burstable)
    nvme_gb: int                   # local NVMe instance storage (0: EBS only)
    source: str
    checked: str = CHECKED

    @property
    def family(self) -> str:
        return self.name.split(".")[1]

    @property
    def network_cards(self) -> int:
        return NETWORK_CARDS.get(self.name.removeprefix("ml."), (1, 0.0))[0]

    @property
    def ip_gbps(self) -> float:
        """What a training container's S3, EFS and FSx traffic gets, sustained: the primary network card's share where
        the type has several (IP_CARD_ASSUMPTION), else the whole instance's."""
        cards = NETWORK_CARDS.get(self.name.removeprefix("ml."))
        return min(self.network_baseline_gbps, cards[1]) if cards else self.network_baseline_gbps

    @property
    def ip_assumption(self) -> str | None:
        """The assumption said beside an answer that uses ``ip_gbps``, where it is less than the whole instance."""
        if self.ip_gbps >= self.network_baseline_gbps:
            return None
        return IP_CARD_ASSUMPTION.format(card=self.ip_gbps, total=self.network_gbps, name=self.name,
                                         cards=self.network_cards)

    @property
    def memory_gib(self) -> int:
        """Host memory (GiB): MLPerf Storage sizes a training dataset by it (dlio.Workload.mlperf_size)."""
        return MEMORY_GIB[self.name.removeprefix("ml.")]

    def to_dict(self) -> dict:
        return {"instance_type": self.name, "vcpus": self.vcpus, "accelerators": self.accelerators,
                "accelerator": self.accelerator, "network_gbps": self.network_gbps,
                "network_baseline_gbps": self.network_baseline_gbps, "network_cards": self.network_cards,
                "ip_gbps": self.ip_gbps, "nvme_gb": self.nvme_gb,
                "source": self.source, "checked": self.checked}


def _row(name, vcpus, accelerators, accelerator, gbps, baseline, nvme, source) -> Instance:
    return Instance(name, vcpus, accelerators, accelerator, gbps, baseline, nvme, source)


INSTANCES: dict[str, Instance] = {i.name: i for i in (
    # NVIDIA V100 (p3: EBS only; p3.2xlarge "up to 10 Gigabit", 2.5 sustained)
    _row("ml.p3.2xlarge", 8, 1, "V100 16GB", 10, 2.5, 0, f"{EC2_AC}; GPU memory: {BATCH_GPU}"),
    _row("ml.p3.8xlarge", 32, 4, "V100 16GB", 10, 10, 0, f"{EC2_AC}; GPU memory: {BATCH_GPU}"),
    _row("ml.p3.16xlarge", 64, 8, "V100 16GB", 25, 25, 0, f"{EC2_AC}; GPU memory: {BATCH_GPU}"),
    _row("ml.p3dn.24xlarge", 96, 8, "V100 32GB", 100, 100, 1800, EC2_AC),
    # NVIDIA A100 (4 x 100 Gbps EFA; 8 x 1,000 GB NVMe)
    _row("ml.p4d.24xlarge", 96, 8, "A100 40GB", 400, 400, 8000, EC2_AC),
    _row("ml.p4de.24xlarge", 96, 8, "A100 80GB", 400, 400, 8000, EC2_AC),
    # NVIDIA H100
    # NVMe: the EC2 guide's 8 x 3,800 GB (the AWS Price List says 8 x 3,840 GB; tests/data/ec2-instance-storage.csv)
    _row("ml.p5.48xlarge", 192, 8, "H100 80GB", 3200, 3200, 30400, f"{KARPENTER_BW}; NVMe {EC2_AC}; the rest: {SECONDARY}"),
    # NVIDIA A10G
    _row("ml.g5.xlarge", 4, 1, "A10G 24GB", 10, 2.5, 250, EC2_AC),
    _row("ml.g5.2xlarge", 8, 1, "A10G 24GB", 10, 5, 450, EC2_AC),
    _row("ml.g5.4xlarge", 16, 1, "A10G 24GB", 25, 10, 600, OWN_TABLE + " and EC2_AC's GPU count"),
    _row("ml.g5.8xlarge", 32, 1, "A10G 24GB", 25, 25, 900, OWN_TABLE + " and EC2_AC's GPU count"),
    _row("ml.g5.12xlarge", 48, 4, "A10G 24GB", 40, 40, 3800, EC2_AC),
    _row("ml.g5.16xlarge", 64, 1, "A10G 24GB", 25, 25, 1900, OWN_TABLE + " and EC2_AC's GPU count"),
    _row("ml.g5.24xlarge", 96, 4, "A10G 24GB", 50, 50, 3800, OWN_TABLE + " and EC2_AC's GPU count"),
    _row("ml.g5.48xlarge", 192, 8, "A10G 24GB", 100, 100, 7600, EC2_AC),
    # NVIDIA L4
    _row("ml.g6.xlarge", 4, 1, "L4 24GB", 10, 2.5, 250, f"{BATCH_GPU}; baseline {KARPENTER_BW}; NVMe {EC2_AC}"),
    _row("ml.g6.12xlarge", 48, 4, "L4 24GB", 40, 40, 3760, f"{BATCH_GPU} (GPUs); network {KARPENTER_BW}; NVMe {EC2_AC}; "
         f"the rest {SECONDARY}"),
    _row("ml.g6.48xlarge", 192, 8, "L4 24GB", 100, 100, 7520, f"network {KARPENTER_BW}; NVMe {EC2_AC}; the rest {SECONDARY}"),
    # NVIDIA L40S
    _row("ml.g6e.xlarge", 4, 1, "L40S 48GB", 20, 2.5, 250, f"baseline {KARPENTER_BW}; the rest {SECONDARY}"),
    _row("ml.g6e.12xlarge", 48, 4, "L40S 48GB", 100, 100, 3800, f"network {KARPENTER_BW}; the rest {SECONDARY}"),
    _row("ml.g6e.48xlarge", 192, 8, "L40S 48GB", 400, 400, 7600, f"network {KARPENTER_BW}; the rest {SECONDARY}"),
    # AWS Trainium
    _row("ml.trn1.2xlarge", 8, 1, "Trainium", 12.5, 3.125, 474, EC2_AC),
    _row("ml.trn1.32xlarge", 128, 16, "Trainium", 800, 800, 7600, EC2_AC),
    # NVIDIA T4 and CPU-only sizes the lab's examples use (no accelerator for the model to emulate). The
    # "up to" sizes (g4dn up to 4xlarge, m5 up to 4xlarge, c5 up to 4xlarge) sustain far less than their
    # headline: g4dn.xlarge "up to 25" holds 5 Gbit/s, m5.large "up to 10" holds 0.75.
    *(_row(f"ml.g4dn.{size}", vcpus, 1 if size != "12xlarge" else 4, "T4 16GB", gbps, baseline, nvme,
           f"{OWN_TABLE} and EC2_AC's GPU count; baseline {KARPENTER_BW}")
      for size, vcpus, gbps, baseline, nvme in (
          ("xlarge", 4, 25, 5, 125), ("2xlarge", 8, 25, 10, 225), ("4xlarge", 16, 25, 20, 225),
          ("8xlarge", 32, 50, 50, 900), ("12xlarge", 48, 50, 50, 900), ("16xlarge", 64, 50, 50, 900))),
    *(_row(f"ml.m5.{size}", vcpus, 0, None, gbps, baseline, 0, f"{OWN_TABLE}; baseline {KARPENTER_BW}")
      for size, vcpus, gbps, baseline in (("large", 2, 10, 0.75), ("xlarge", 4, 10, 1.25), ("2xlarge", 8, 10, 2.5),
                                          ("4xlarge", 16, 10, 5), ("12xlarge", 48, 12, 12), ("24xlarge", 96, 25, 25))),
    *(_row(f"ml.c5.{size}", vcpus, 0, None, gbps, baseline, 0, f"{OWN_TABLE}; baseline {KARPENTER_BW}")
      for size, vcpus, gbps, baseline in (("xlarge", 4, 10, 1.25), ("2xlarge", 8, 10, 2.5), ("4xlarge", 16, 10, 5),
                                          ("9xlarge", 36, 12, 12), ("18xlarge", 72, 25, 25))),
)}


# Host memory per EC2 type, GiB ("Memory (GiB)" of the EC2 instance type specifications: docs.aws.amazon.com/ec2/latest/
# instancetypes/ac.html, gp.html, co.html; confirm with `aws ec2 describe-instance-types --query
# 'InstanceTypes[].MemoryInfo'`). tests/test_dlio.py checks every row of INSTANCES has one.
MEMORY_GIB = {
    "p3.2xlarge": 61, "p3.8xlarge": 244, "p3.16xlarge": 488, "p3dn.24xlarge": 768, "p4d.24xlarge": 1152,
    "p4de.24xlarge": 1152, "p5.48xlarge": 2048,
    "g5.xlarge": 16, "g5.2xlarge": 32, "g5.4xlarge": 64, "g5.8xlarge": 128, "g5.12xlarge": 192, "g5.16xlarge": 256,
    "g5.24xlarge": 384, "g5.48xlarge": 768, "g6.xlarge": 16, "g6.12xlarge": 192, "g6.48xlarge": 768,
    "g6e.xlarge": 32, "g6e.12xlarge": 384, "g6e.48xlarge": 1536, "trn1.2xlarge": 32, "trn1.32xlarge": 512,
    "g4dn.xlarge": 16, "g4dn.2xlarge": 32, "g4dn.4xlarge": 64, "g4dn.8xlarge": 128, "g4dn.12xlarge": 192,
    "g4dn.16xlarge": 256, "m5.large": 8, "m5.xlarge": 16, "m5.2xlarge": 32, "m5.4xlarge": 64, "m5.12xlarge": 192,
    "m5.24xlarge": 384, "c5.xlarge": 8, "c5.2xlarge": 16, "c5.4xlarge": 32, "c5.9xlarge": 72, "c5.18xlarge": 144,
}


def instance(instance_type: str) -> Instance | None:
    return INSTANCES.get(instance_type)


def instance_storage_gb(instance_type: str) -> int:
    """NVMe instance storage (GB) of the type, 0 for EBS-only types (and types not in the table)."""
    row = INSTANCES.get(instance_type)
    return row.nvme_gb if row is not None else 0
