"""Saved EC2 catalog answers read from files: the one reader of ``groupless plan`` and the kwok provider.

Three files, in the shapes the AWS CLI saves (``aws ec2 ... --output json``):

- instance types: the ``DescribeInstanceTypes`` response, ``{"InstanceTypes": [...]}``, or the
  bare list of its items;
- offerings: the ``DescribeInstanceTypeOfferings --location-type availability-zone``
  response, ``{"InstanceTypeOfferings": [{"InstanceType", "Location", "LocationType"}]}``, or
  the bare list; the zones name the region (``ap-south-1a`` is in ``ap-south-1``);
- prices (optional): ``{"<region>": {"<type>": usd}}`` or
  ``{"<region>": {"on-demand": {...}, "spot": {"<type>": usd | {"<zone>": usd}}}}`` (USD per
  hour, :func:`provisioner.cloudprovider.aws.catalog.parse_pricing`), over the static list
  prices of the region.

Turning these into the solver's instance types is
:func:`provisioner.cloudprovider.aws.catalog.instance_types_from_ec2` (the AWS provider's own
conversion); this module only reads, checks the shape and tells the region. Every error is a
:class:`CatalogFileError` whose message starts with the file's path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from provisioner.cloudprovider.aws.catalog import (
    PriceBook,
    PricingFileError,
    parse_pricing,
    static_price_book,
)

#: The response keys of the two EC2 answers.
INSTANCE_TYPES_KEY = "InstanceTypes"
OFFERINGS_KEY = "InstanceTypeOfferings"

#: ``ap-south-1a`` -> ``ap-south-1``; also ``us-gov-west-1a``, Local Zones (``us-west-2-lax-1a``)
#: and Wavelength Zones (``us-east-1-wl1-bos-wlz-1``): the region is the zone name up to its number.
_ZONE_REGION = re.compile(r"^([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+)(?:[a-z]$|-)")


class CatalogFileError(ValueError):
    """A catalog or pricing file that cannot be read or has the wrong shape; the message names it."""


def read_json(path: str | Path) -> Any:
    """The JSON document of a catalog or pricing file. Raises CatalogFileError naming the file once."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise CatalogFileError(f"{path}: cannot read: {error}") from error
    except json.JSONDecodeError as error:
        raise CatalogFileError(f"{path}: not valid JSON: {error}") from error


def read_items(path: str | Path, key: str) -> list[dict[str, Any]]:
    """The items of an EC2 answer file: ``{key: [...]}`` or the bare list. Raises CatalogFileError."""
    document = read_json(path)
    if isinstance(document, list):
        return document
    if not isinstance(document, dict) or not isinstance(document.get(key), list):
        raise CatalogFileError(f"{path}: expected the {key} response shape ({{\"{key}\": [...]}})")
    items: list[dict[str, Any]] = document[key]
    return items


def read_instance_types(path: str | Path) -> list[dict[str, Any]]:
    """``DescribeInstanceTypes`` items of ``path``. Raises CatalogFileError."""
    return read_items(path, INSTANCE_TYPES_KEY)


def read_offerings(path: str | Path) -> list[dict[str, Any]]:
    """``DescribeInstanceTypeOfferings`` items of ``path``. Raises CatalogFileError."""
    return read_items(path, OFFERINGS_KEY)


def region_of_zone(zone: str) -> str | None:
    """The region of an availability zone name (``ap-south-1a`` -> ``ap-south-1``), None if not one."""
    match = _ZONE_REGION.match(zone)
    return match.group(1) if match else None


def offerings_region(offerings: Sequence[Mapping[str, Any]], path: str | Path) -> str:
    """The one region of the offerings' zones.

    Raises CatalogFileError (``<path>: cannot tell the region from the offerings' locations
    (<what was seen>)``) when they name no region, several, or a location that is not a zone.
    """
    regions: set[str] = set()
    unknown: set[str] = set()
    for item in offerings:
        location = str(item.get("Location", ""))
        if item.get("LocationType", "availability-zone") == "region":
            regions.add(location)
            continue
        region = region_of_zone(location)
        if region is None:
            unknown.add(location)
        else:
            regions.add(region)
    if unknown or len(regions) != 1:
        seen = ", ".join(sorted(regions | unknown)) or "none"
        raise CatalogFileError(f"{path}: cannot tell the region from the offerings' locations ({seen})")
    return regions.pop()


def price_book(path: str | Path | None, region: str, warnings: list[str]) -> PriceBook:
    """The static list prices of ``region``, overridden by the pricing file's section for it.

    A pricing file without ``region`` is not an error: a warning naming the regions it has is
    appended to ``warnings`` and the static prices are used. Raises CatalogFileError when the
    file cannot be read or is not a pricing document.
    """
    book = static_price_book(region)
    if not path:
        return book
    document = read_json(path)
    try:
        overrides = parse_pricing(document, region, source=f"pricing file {path}")
    except PricingFileError as error:
        raise CatalogFileError(f"{path}: {error}") from error
    if not overrides.on_demand and not overrides.spot:
        regions = ", ".join(sorted(str(k) for k in document)) if isinstance(document, dict) else ""
        warnings.append(f"{path}: no prices for region {region} (the file has: {regions or 'none'}); "
                        f"using {book.source}")
        return book
    return book.merged(overrides)


__all__ = [
    "INSTANCE_TYPES_KEY",
    "OFFERINGS_KEY",
    "CatalogFileError",
    "offerings_region",
    "price_book",
    "read_instance_types",
    "read_items",
    "read_json",
    "read_offerings",
    "region_of_zone",
]
