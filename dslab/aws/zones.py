"""Availability Zone IDs: the format, and which region a zone ID belongs to (standard library only).

Zone *names* (us-east-1a) map to different physical zones in each account; zone *IDs* (use1-az4) name
the same physical zone everywhere (AWS Regions and Availability Zones, "AZ IDs":
https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html). A zone ID is the
region's abbreviation, the region's number, "-az" and the zone's number: the abbreviation keeps the
region's geography code and one or two letters per direction word (us-east-1 -> use1, eu-west-1 ->
euw1, ap-northeast-1 -> apne1, cn-northwest-1 -> cnnw1, us-gov-west-1 -> usgw1; see the zone tables
of https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html).
"""

from __future__ import annotations

import re

AZ_ID_RE = re.compile(r"^([a-z]+)(\d+)-az(\d+)$")
DIRECTIONS = {"east": "e", "west": "w", "north": "n", "south": "s", "central": "c",
              "northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}
# Where S3 Express One Zone directory buckets can be made, by zone ID: the table "S3 Express One Zone
# Availability Zones and Regions" of the S3 User Guide
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-Endpoints.html, read 2026-11-30).
# AWS publishes no API for it; a zone added later is missing here until this table is updated.
EXPRESS_ZONE_IDS: dict[str, tuple[str, ...]] = {
    "us-east-1": ("use1-az4", "use1-az5", "use1-az6"),
    "us-east-2": ("use2-az1", "use2-az2"),
    "us-west-2": ("usw2-az1", "usw2-az3", "usw2-az4"),
    "ap-south-1": ("aps1-az1", "aps1-az3"),
    "ap-northeast-1": ("apne1-az1", "apne1-az4"),
    "eu-west-1": ("euw1-az1", "euw1-az3"),
    "eu-north-1": ("eun1-az1", "eun1-az2", "eun1-az3"),
}
EXPRESS_ZONES_SOURCE = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/s3-express-Endpoints.html (read 2026-11-30)"
FIND_ZONE_IDS = ("aws ec2 describe-availability-zones --region {region} "
                 "--query 'AvailabilityZones[].[ZoneName,ZoneId]' --output text")


class ZoneIdError(ValueError):
    """A zone ID that cannot be right; the message says what is expected and how to find one."""


def region_zone_prefix(region: str) -> str:
    """The zone-ID prefix of a region: us-east-1 -> use1, eu-west-1 -> euw1, us-gov-west-1 -> usgw1."""
    parts = region.split("-")
    if len(parts) == 3 and parts[1] in DIRECTIONS and parts[2].isdigit():
        return f"{parts[0]}{DIRECTIONS[parts[1]]}{parts[2]}"
    if len(parts) == 4 and parts[1] == "gov" and parts[2] in DIRECTIONS and parts[3].isdigit():
        return f"{parts[0]}g{DIRECTIONS[parts[2]]}{parts[3]}"
    raise ZoneIdError(f"region {region!r}: no zone-ID rule is known for this region's name; "
                      "use a standard or GovCloud region (e.g. us-east-1, eu-west-1, us-gov-west-1)")


def check_zone_id(az_id: str, region: str) -> str:
    """``az_id`` if it is a zone ID of ``region`` by its form (whether it exists is the account's business)."""
    prefix = region_zone_prefix(region)
    how = "find your account's zone IDs with: " + FIND_ZONE_IDS.format(region=region)
    found = AZ_ID_RE.match(az_id or "")
    if not found:
        raise ZoneIdError(f"{az_id!r} is not an Availability Zone ID: expected {prefix}-az<N>, e.g. {prefix}-az4; {how}")
    if f"{found.group(1)}{found.group(2)}" != prefix:
        raise ZoneIdError(f"{az_id!r} is not a zone of region {region}: its zone IDs start with {prefix}- "
                          f"(e.g. {prefix}-az4); {how}")
    return az_id


def express_zone_ids(region: str) -> tuple[str, ...]:
    """The zone IDs of ``region`` that offer S3 Express One Zone (empty: none does)."""
    return EXPRESS_ZONE_IDS.get(region, ())


def offers_express(az_id: str, region: str) -> bool:
    return az_id in express_zone_ids(region)


def express_where(region: str) -> str:
    """Where Express can go instead, in words: the region's zone IDs, or the regions that have it."""
    zones = express_zone_ids(region)
    if zones:
        return f"zone IDs with it in {region}: {', '.join(zones)}"
    return f"no zone of {region} has it (regions that do: {', '.join(sorted(EXPRESS_ZONE_IDS))})"


def subnet_block(az_id: str) -> int:
    """Which of the VPC's 16 subnet blocks the lab's subnet takes in this zone: a zone move then
    creates the new subnet beside the old one (EC2 refuses overlapping CIDRs) before the old goes."""
    found = AZ_ID_RE.match(az_id)
    if not found:
        raise ZoneIdError(f"{az_id!r} is not an Availability Zone ID")
    return (int(found.group(3)) - 1) % 16
