"""A dated price table (US dollars, on-demand, us-east-1) and what a job costs.

Every figure names where it comes from; a YAML file of the same shape overrides any of them
(``dslab ... --prices FILE``), and the table's date and source travel into every report.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .instances import instance_storage_gb

HOURS_PER_MONTH = 730.0  # AWS bills GB-month and MB/s-month on 730 hours
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600

DEFAULT_TABLE: dict[str, Any] = {
    "date": "2026-11-01",
    "region": "us-east-1",
    "source": ("AWS public pricing pages (aws.amazon.com/sagemaker/pricing, /s3/pricing, /fsx/lustre/pricing, "
               "/efs/pricing, /datasync/pricing), on-demand, us-east-1; ml.p3.2xlarge and FSx/S3 figures as "
               "quoted in the source post; the ml.g6, g6e, p4de, p5 and trn1 rows were added 2026-11-30 from other "
               "sources, each row's in dated_rows (override any with --prices)"),
    # SageMaker training, per instance-hour.
    "instance_hourly": {
        "ml.m5.large": 0.115, "ml.m5.xlarge": 0.23, "ml.m5.2xlarge": 0.461, "ml.m5.4xlarge": 0.922,
        "ml.m5.12xlarge": 2.765, "ml.m5.24xlarge": 5.53,
        "ml.c5.xlarge": 0.204, "ml.c5.2xlarge": 0.408, "ml.c5.4xlarge": 0.816, "ml.c5.9xlarge": 1.836,
        "ml.c5.18xlarge": 3.672,
        "ml.p3.2xlarge": 3.825, "ml.p3.8xlarge": 14.688, "ml.p3.16xlarge": 28.152, "ml.p3dn.24xlarge": 35.894,
        "ml.g4dn.xlarge": 0.7364, "ml.g4dn.2xlarge": 0.94, "ml.g4dn.4xlarge": 1.505, "ml.g4dn.8xlarge": 2.72,
        "ml.g4dn.12xlarge": 4.89, "ml.g4dn.16xlarge": 5.44,
        "ml.g5.xlarge": 1.408, "ml.g5.2xlarge": 1.515, "ml.g5.4xlarge": 2.03, "ml.g5.8xlarge": 3.06,
        "ml.g5.12xlarge": 7.09, "ml.g5.16xlarge": 4.60, "ml.g5.24xlarge": 10.18, "ml.g5.48xlarge": 20.36,
        "ml.p4d.24xlarge": 37.688,
        # Added 2026-11-30, not from the pages above: each has its date and source in dated_rows below.
        # Not confirmed against aws.amazon.com/sagemaker/pricing (its table is rendered by script). Read
        # 2026-11-30 from public code quoting the AWS Price List API (AmazonSageMaker, us-east-1, Train/Host
        # usage types, the same rate for these types): ml.p5.48xlarge, ml.g6.12xlarge, ml.g6.48xlarge and
        # ml.trn1.32xlarge in aws-samples/foundation-model-benchmarking-tool src/fmbench/configs/pricing.yml;
        # ml.g6.xlarge and ml.g6e.* in several projects' "us-east-1 Training, Pricing API" tables (ml.g6e.48xlarge
        # in one only). EC2 cut P4/P5 on-demand prices in 2025; whether SageMaker followed is not confirmed.
        "ml.p5.48xlarge": 113.068,
        "ml.g6.xlarge": 1.1267, "ml.g6.12xlarge": 5.752, "ml.g6.48xlarge": 16.688,
        "ml.g6e.xlarge": 2.61, "ml.g6e.12xlarge": 13.12, "ml.g6e.48xlarge": 37.66,
        "ml.trn1.32xlarge": 28.497,
        # No listing found: the EC2 on-demand price times the family's SageMaker/EC2 ratio (ml.p4d 37.688 /
        # p4d 32.7726; ml.trn1.32xlarge 28.497 / trn1.32xlarge 21.50). An assumption: give the real one with --prices.
        "ml.p4de.24xlarge": 47.11,    # p4de.24xlarge $40.966 x 1.15
        "ml.trn1.2xlarge": 1.7811,    # trn1.2xlarge $1.34375 x 1.3254
    },
    # The instance rows added after the table's date, from other sources than its own: each row's date and source
    # (PriceTable.row_date / row_source; the label names them, and a --prices row of the same type replaces it).
    "dated_rows": {
        **{itype: {"date": "2026-11-30", "source": "public code quoting the AWS Price List API (AmazonSageMaker, us-east-1, "
                                                   "Train usage type), not confirmed on aws.amazon.com/sagemaker/pricing"}
           for itype in ("ml.p5.48xlarge", "ml.g6.xlarge", "ml.g6.12xlarge", "ml.g6.48xlarge", "ml.g6e.xlarge",
                         "ml.g6e.12xlarge", "ml.g6e.48xlarge", "ml.trn1.32xlarge")},
        **{itype: {"date": "2026-11-30", "source": "no listing found: the EC2 on-demand price times the family's "
                                                   "SageMaker/EC2 ratio (an assumption)"}
           for itype in ("ml.p4de.24xlarge", "ml.trn1.2xlarge")},
    },
    "ml_storage_gb_month": 0.14,          # the training volume (EBS gp2 for ml.* instances)
    "s3_storage_gb_month": 0.023,         # S3 Standard, first 50 TB
    "s3_get_per_million": 0.40,           # GET/SELECT requests (the post: $0.40 per million)
    "s3_list_per_million": 5.00,          # LIST requests ($0.005 per 1,000)
    "s3_put_per_million": 5.00,           # PUT, COPY, POST requests ($0.005 per 1,000; a checkpoint's upload parts)
    "fsx_scratch2_gb_month": 0.140,       # FSx for Lustre Scratch 2 (the post: $140 per TB-month)
    "efs_standard_gb_month": 0.30,        # EFS Standard storage
    # EFS Infrequent Access storage and reads (Regional; secondary sources of 2026 quoting /efs/pricing, where
    # AWS lowered IA from $0.025 in Nov 2023; confirm there). Files under 128 KiB never leave Standard.
    "efs_ia_gb_month": 0.016,
    "efs_ia_read_per_gb": 0.01,
    "efs_provisioned_mibps_month": 6.00,  # EFS Provisioned throughput, per MiB/s-month
    "efs_elastic_read_per_gb": 0.03,      # EFS Elastic throughput, data read (secondary sources; confirm on /efs/pricing)
    "efs_elastic_write_per_gb": 0.06,     # EFS Elastic throughput, data written (secondary sources; confirm on /efs/pricing)
    # FSx for Lustre Persistent 2 SSD per throughput tier (MB/s/TiB), per GB-month: the 125 tier from a
    # secondary source, the others not confirmed against the live pricing page (override with --prices).
    "fsx_persistent2_125_gb_month": 0.145,
    "fsx_persistent2_250_gb_month": 0.210,
    "fsx_persistent2_500_gb_month": 0.340,
    "fsx_persistent2_1000_gb_month": 0.600,
    "datasync_per_gb": 0.0125,            # DataSync data copied (EFS staging)
    # S3 Express One Zone (aws.amazon.com/s3/pricing, storage class S3 Express One Zone, us-east-1; the
    # S3 FAQ's worked example charges the per-GB upload/retrieval fees on every request's bytes).
    "express_gb_month": 0.11,             # storage, per GB-month
    "express_put_per_thousand": 0.00113,  # PUT, COPY, POST, LIST requests
    "express_get_per_thousand": 0.00003,  # GET and all other requests
    "express_upload_per_gb": 0.0032,      # data uploaded (a copy's bytes are uploaded)
    "express_retrieval_per_gb": 0.0006,   # data retrieved
}


# Where each price other than an instance's comes from: the page it was read on, or the secondary source that
# gave it (OTHER: not read on the table's own pages; `dslab prices` shows it and the footer counts such rows).
TABLE_PAGES = "table"
OTHER = "other"
PRICE_SOURCES: dict[str, tuple[str, str]] = {
    "ml_storage_gb_month": (TABLE_PAGES, "aws.amazon.com/sagemaker/pricing: ML storage, the training volume (EBS gp2)"),
    "s3_storage_gb_month": (TABLE_PAGES, "aws.amazon.com/s3/pricing: S3 Standard, first 50 TB"),
    "s3_get_per_million": (TABLE_PAGES, "aws.amazon.com/s3/pricing: GET and SELECT requests (the post: $0.40 per million)"),
    "s3_list_per_million": (TABLE_PAGES, "aws.amazon.com/s3/pricing: LIST requests ($0.005 per 1,000)"),
    "s3_put_per_million": (TABLE_PAGES, "aws.amazon.com/s3/pricing: PUT, COPY, POST requests ($0.005 per 1,000), a "
                                        "checkpoint's upload parts"),
    "fsx_scratch2_gb_month": (TABLE_PAGES, "aws.amazon.com/fsx/lustre/pricing: Scratch 2 SSD (the post: $140 per TB-month)"),
    "efs_standard_gb_month": (TABLE_PAGES, "aws.amazon.com/efs/pricing: Standard storage"),
    "efs_ia_gb_month": (OTHER, "secondary sources of 2026 quoting aws.amazon.com/efs/pricing (AWS lowered IA from "
                               "$0.025 in Nov 2023): Infrequent Access storage; confirm there"),
    "efs_ia_read_per_gb": (OTHER, "secondary sources of 2026 quoting aws.amazon.com/efs/pricing: reads from "
                                  "Infrequent Access; confirm there"),
    "efs_provisioned_mibps_month": (TABLE_PAGES, "aws.amazon.com/efs/pricing: Provisioned throughput"),
    "efs_elastic_read_per_gb": (OTHER, "secondary sources quoting aws.amazon.com/efs/pricing: Elastic throughput, "
                                       "data read; confirm there"),
    "efs_elastic_write_per_gb": (OTHER, "secondary sources quoting aws.amazon.com/efs/pricing: Elastic throughput, "
                                        "data written; confirm there"),
    "fsx_persistent2_125_gb_month": (OTHER, "a secondary source quoting aws.amazon.com/fsx/lustre/pricing: "
                                            "Persistent 2 SSD at 125 MB/s per TiB"),
    "fsx_persistent2_250_gb_month": (OTHER, "not confirmed against aws.amazon.com/fsx/lustre/pricing: Persistent 2 SSD "
                                            "at 250 MB/s per TiB"),
    "fsx_persistent2_500_gb_month": (OTHER, "not confirmed against aws.amazon.com/fsx/lustre/pricing: Persistent 2 SSD "
                                            "at 500 MB/s per TiB"),
    "fsx_persistent2_1000_gb_month": (OTHER, "not confirmed against aws.amazon.com/fsx/lustre/pricing: Persistent 2 SSD "
                                             "at 1,000 MB/s per TiB"),
    "datasync_per_gb": (TABLE_PAGES, "aws.amazon.com/datasync/pricing: data copied (EFS staging)"),
    "express_gb_month": (TABLE_PAGES, "aws.amazon.com/s3/pricing, S3 Express One Zone: storage"),
    "express_put_per_thousand": (TABLE_PAGES, "aws.amazon.com/s3/pricing, S3 Express One Zone: PUT, COPY, POST, LIST"),
    "express_get_per_thousand": (TABLE_PAGES, "aws.amazon.com/s3/pricing, S3 Express One Zone: GET and other requests"),
    "express_upload_per_gb": (TABLE_PAGES, "aws.amazon.com/s3/pricing, S3 Express One Zone: data uploaded"),
    "express_retrieval_per_gb": (TABLE_PAGES, "aws.amazon.com/s3/pricing, S3 Express One Zone: data retrieved"),
}
INSTANCE_PAGE = "aws.amazon.com/sagemaker/pricing: training, on-demand"
UNITS = (("instance_hourly", "$/hour"), ("_gb_month", "$/GB-month"), ("_per_million", "$/million requests"),
         ("_per_thousand", "$/1,000 requests"), ("_per_gb", "$/GB"), ("_mibps_month", "$/(MiB/s)-month"))
# What `--prices FILE.yaml` may give, as `dslab prices` says it.
OVERRIDE_HELP = ("`--prices FILE.yaml` (estimate, recommend, size, report, run, doctor, express, efs) overrides any "
                 "price above by its name (instance_hourly: {ml.p5.48xlarge: 98.32}; s3_get_per_million: 0.4), and "
                 "the table's date, source and region; an instance row it gives replaces that row's own date and source")


def price_unit(name: str) -> str:
    return next(unit for suffix, unit in UNITS if name.startswith(suffix) or name.endswith(suffix))


@dataclass(frozen=True)
class PriceRow:
    """One price as `dslab prices` lists it: its value, unit, date and where it comes from."""
    name: str
    value: float
    unit: str
    date: str
    source: str
    other_source: bool = False        # not read on the table's own pages (a dated row, a secondary source)
    overridden_by: str | None = None  # the --prices file that gave it

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "date": self.date, "source": self.source,
                "other_source": self.other_source, "overridden_by": self.overridden_by}


@dataclass(frozen=True)
class PriceTable:
    data: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULT_TABLE))
    # Which prices a --prices file gave (name, or instance_hourly.<type>, to the file): rows() names it.
    overrides: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def date(self) -> str:
        return self.data["date"]

    @property
    def source(self) -> str:
        return self.data["source"]

    def label(self) -> str:
        """The table's date and source, then each group of rows with their own (dated_rows)."""
        groups: dict[tuple[str, str], list[str]] = {}
        for itype, row in sorted(self.data.get("dated_rows", {}).items()):
            groups.setdefault((row["date"], row["source"]), []).append(itype)
        dated = "".join(f"; {', '.join(types)}: prices of {date}, {source}" for (date, source), types in groups.items())
        return f"prices of {self.date} ({self.data['region']}, on-demand): {self.source}{dated}"

    def footer(self) -> str:
        """One line under every answer: the date, the region and how many rows come from elsewhere (`dslab prices`
        lists them; label() and --json keep every detail)."""
        rows = self.rows()
        other = sum(1 for row in rows if row.other_source and not row.overridden_by)
        files = sorted({row.overridden_by for row in rows if row.overridden_by})
        given = sum(1 for row in rows if row.overridden_by)
        show = "dslab prices" + "".join(f" --prices {f}" for f in files[:1])
        overridden = f"{given} from {', '.join(files)}; " if files else ""
        return (f"prices of {self.date}, {self.data['region']}, on-demand: {overridden}{other} rows from other sources: "
                f"`{show}`")

    def rows(self) -> list[PriceRow]:
        """Every price with its unit, date and source: the instances' rows first (by type), then the others as the
        table lists them."""
        dated = self.data.get("dated_rows", {})
        # A file's rows carry the file's date, when it gives one (with_overrides dates the table otherwise).
        file_date = "not dated" if self.date.endswith(" with overrides") else self.date
        table_date = self.date.removesuffix(" with overrides")
        out = []
        family_then_price = sorted(self.data["instance_hourly"].items(), key=lambda item: (item[0].split(".")[1], item[1]))
        for itype, value in family_then_price:
            name = f"instance_hourly.{itype}"
            by = self.overrides.get(name)
            row = dated.get(itype)
            source = (by if by else row["source"] if row else
                      INSTANCE_PAGE + (" (the post quotes it)" if itype == "ml.p3.2xlarge" else ""))
            date = file_date if by else row["date"] if row else table_date
            out.append(PriceRow(name, value, "$/hour", date, source, other_source=bool(row) and not by, overridden_by=by))
        for name, value in self.data.items():
            if name in ("date", "region", "source", "instance_hourly", "dated_rows"):
                continue
            by = self.overrides.get(name)
            kind, source = PRICE_SOURCES.get(name, (OTHER, "no source recorded"))
            out.append(PriceRow(name, value, price_unit(name), file_date if by else table_date, by or source,
                                other_source=kind == OTHER and not by, overridden_by=by))
        return out

    def row_date(self, instance_type: str) -> str:
        """The date of an instance's price: its own where it was added later (dated_rows), else the table's."""
        return (self.data.get("dated_rows", {}).get(instance_type) or {}).get("date", self.date)

    def row_source(self, instance_type: str) -> str:
        return (self.data.get("dated_rows", {}).get(instance_type) or {}).get("source", self.source)

    def instance_hourly(self, instance_type: str) -> float | None:
        return self.data["instance_hourly"].get(instance_type)

    def require_instance(self, instance_type: str, field_name: str = "instance_type") -> float:
        """The instance's hourly price; an instance the table does not price is refused (never costed at $0)."""
        price = self.instance_hourly(instance_type)
        if price is None:
            raise ConfigError(field_name, f"no price for {instance_type} in the price table of {self.date}: add it "
                              f"under instance_hourly in a --prices YAML file (instance_hourly: {{{instance_type}: "
                              "<dollars per hour>}), or pick a priced type such as "
                              + ", ".join(sorted(self.data["instance_hourly"])[:4]))
        return price

    def __getitem__(self, key: str) -> float:
        return self.data[key]

    def fsx_hourly(self, capacity_gib: int) -> float:
        """What a Scratch 2 file system of this size bills per hour, used or not."""
        return self["fsx_scratch2_gb_month"] * capacity_gib / HOURS_PER_MONTH

    @classmethod
    def with_overrides(cls, overrides: dict[str, Any] | None, source: str = "prices file") -> "PriceTable":
        data = copy.deepcopy(DEFAULT_TABLE)
        if not overrides:
            return cls(data)
        given: dict[str, str] = {}
        if not isinstance(overrides, dict):
            raise ConfigError(source, "must be a mapping of price names to numbers")
        unknown = sorted(set(overrides) - set(DEFAULT_TABLE))
        if unknown:
            raise ConfigError(f"{source}: {unknown[0]}", "is not a price this table knows", sorted(DEFAULT_TABLE))
        for key, value in overrides.items():
            if key == "instance_hourly":
                if not isinstance(value, dict):
                    raise ConfigError(f"{source}: instance_hourly", "must map instance types to dollars per hour")
                for itype, price in value.items():
                    if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
                        raise ConfigError(f"{source}: instance_hourly.{itype}", f"{price!r} is not a price")
                data["instance_hourly"].update({k: float(v) for k, v in value.items()})
                for itype in value:   # the file's price, under the file's date and source
                    data["dated_rows"].pop(itype, None)
                    given[f"instance_hourly.{itype}"] = source
            elif key == "dated_rows":
                raise ConfigError(f"{source}: dated_rows", "is the table's own record of where its rows come from",
                                  "give prices under instance_hourly, with date and source for the file")
            elif key in ("date", "source", "region"):
                data[key] = str(value)
            else:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise ConfigError(f"{source}: {key}", f"{value!r} is not a price")
                data[key] = float(value)
                given[key] = source
        if "date" not in overrides:
            data["date"] = f"{DEFAULT_TABLE['date']} with overrides"
        return cls(data, given)


@dataclass(frozen=True)
class JobCost:
    instance: float
    storage: float
    requests: float

    @property
    def total(self) -> float:
        return self.instance + self.storage + self.requests

    def to_dict(self) -> dict[str, float]:
        return {"instance": round(self.instance, 6), "storage": round(self.storage, 6),
                "requests": round(self.requests, 6), "total": round(self.total, 6)}


def s3_get_requests(mode: str, files: int | None, total_bytes: int | None, epochs: int) -> int:
    """GET requests a job makes against S3, by mode (FSx lazy-loads each file once; EFS reads none)."""
    if not files:
        return 0
    # Large objects are fetched in ranged GETs; 8 MiB parts is the usual client part size.
    per_epoch = max(files, (total_bytes or 0) // (8 * 1024 * 1024))
    # Script: the lab's script GETs each JPEG and range-GETs shards in 8 MiB parts, every epoch.
    return {"File": per_epoch, "FastFile": per_epoch * epochs, "Pipe": per_epoch * epochs,
            "FSx": per_epoch, "EFS": 0, "Script": per_epoch * epochs}.get(mode, 0)


def s3_list_requests(mode: str, files: int | None, instance_count: int = 1) -> int:
    """ListObjectsV2 requests (1,000 keys a page) a Script job makes: each instance lists the prefix once.
    SageMaker's own listing for File/FastFile/Pipe is not billed to the account as far as the lab knows."""
    if mode != "Script" or not files:
        return 0
    return -(-files // 1000) * max(1, instance_count)


def job_cost(prices: PriceTable, *, mode: str, instance_type: str, instance_count: int, volume_size_gb: int,
             billable_seconds: float | None, wall_seconds: float | None, files: int | None = None,
             total_bytes: int | None = None, epochs: int = 1, fsx_capacity_gib: int = 1200,
             storage: str | None = None, fsx: Any = None, efs: Any = None, efs_ia_gb_read: float = 0.0) -> JobCost:
    """Instance time: ``billable_seconds`` is one instance's, as DescribeTrainingJob's BillableTimeInSeconds is
    ("Multiply BillableTimeInSeconds by the number of instances (InstanceCount) ... to get the total compute time
    SageMaker bills you"; a spot job's already has its saving taken off), so the instances cost billable x count x
    the hourly price. Then the training volumes and, for FSx jobs, the file system's uptime while the job ran, and
    S3 GETs (for jobs on the S3 Express One Zone bucket: its GET and per-GB retrieval prices, and the staged copy's
    storage while the job ran; staging itself is priced once per dataset, express_staging_cost)."""
    billable = billable_seconds or 0.0
    # A record or estimate never costs an unpriced instance at a silent $0: no billed time, nothing to price.
    hourly = prices.require_instance(instance_type) if billable > 0 else (prices.instance_hourly(instance_type) or 0.0)
    wall = wall_seconds or 0.0
    instance = hourly * billable * max(1, instance_count) / 3600.0
    # NVMe types get no EBS volume whatever VolumeSizeInGB says (premise.Volume quotes the API reference): none priced.
    ebs_gb = 0 if instance_storage_gb(instance_type) else volume_size_gb
    volumes = prices["ml_storage_gb_month"] * ebs_gb * instance_count * wall / SECONDS_PER_MONTH
    if mode == "FSx":   # the file system's uptime while the job ran (provisioning.FsxConfig, or Scratch 2)
        volumes += (fsx.hourly(prices) * wall / 3600 if fsx is not None else
                    prices["fsx_scratch2_gb_month"] * fsx_capacity_gib * wall / SECONDS_PER_MONTH)
    if mode == "EFS" and efs is not None:   # Provisioned or Elastic throughput beside the storage
        volumes += efs.throughput_usd(prices, hours=wall / 3600, gb_read=(total_bytes or 0) / 1e9 * epochs)
    if mode == "EFS":   # reads from Infrequent Access are billed per GB ("you will pay a fee each time you read")
        volumes += efs_ia_gb_read * prices["efs_ia_read_per_gb"]
    gets = s3_get_requests(mode, files, total_bytes, epochs)
    lists = s3_list_requests(mode, files, instance_count)
    if storage == "express":
        reads = {"File": 1, "FastFile": epochs, "Pipe": epochs, "Script": epochs}.get(mode, 0)
        requests = (gets * prices["express_get_per_thousand"] / 1000 + lists * prices["express_put_per_thousand"] / 1000
                    + (total_bytes or 0) / 1e9 * reads * prices["express_retrieval_per_gb"])
        storage_cost = prices["express_gb_month"] * (total_bytes or 0) / 1e9 * wall / SECONDS_PER_MONTH
        return JobCost(instance, volumes + storage_cost, requests)
    requests = gets * prices["s3_get_per_million"] / 1e6 + lists * prices["s3_list_per_million"] / 1e6
    return JobCost(instance, volumes, requests)


def express_staging_cost(prices: PriceTable, files: int, total_bytes: int) -> float:
    """Copying a dataset into the directory bucket once: a COPY (PUT-priced) per object plus the
    uploaded bytes, and a GET per object on the source (S3 Standard)."""
    return (files * prices["express_put_per_thousand"] / 1000 + total_bytes / 1e9 * prices["express_upload_per_gb"]
            + files * prices["s3_get_per_million"] / 1e6)
