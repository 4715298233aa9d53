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
