"""Live prices: on-demand from the AWS Pricing API, spot from DescribeSpotPriceHistory, refreshed in the background.

Why background refresh: the Pricing API answers thousands of products in pages and is slow;
a launch must never wait for it. The provider starts from the static on-demand table
(``data/on-demand-prices.json``), swaps in fresher prices when a refresh succeeds, and keeps the
last good prices when one fails (logged once per failure streak). A ``--pricing-file`` always
wins. Karpenter v1 does the same (``pkg/providers/pricing``).

moto has no Pricing API (404 "Not yet implemented") and answers DescribeSpotPriceHistory with
the placeholder ``0.00001`` for everything; :class:`~provisioner.cloudprovider.aws.catalog.PriceBook`
ignores prices at or below 0.0001 USD/h, so against moto the static table and estimates are used.

Sources of the request shapes: Pricing ``GetProducts`` with ``TERM_MATCH`` filters on
``regionCode``, ``operatingSystem=Linux``, ``tenancy=Shared``, ``preInstalledSw=NA``,
``capacitystatus=Used``, ``marketoption=OnDemand``; each ``PriceList`` entry is a JSON
document whose ``terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD`` is the hourly price.
DescribeSpotPriceHistory with ``ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]``
and ``StartTime=now`` gives the current price per (type, zone); the latest timestamp wins.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from provisioner.clock import Clock
from provisioner.cloudprovider.aws.catalog import PriceBook, load_pricing_file, static_price_book

log = logging.getLogger(__name__)

LINUX_PRODUCT_DESCRIPTIONS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")


def pricing_region(region: str) -> str:
    """The region whose Pricing API endpoint serves ``region`` (it exists in only a few)."""
    if region.startswith("cn-"):
        return "cn-northwest-1"
    if region.startswith("ap-"):
        return "ap-south-1"
    if (
        region.startswith("eu-")
        or region.startswith("me-")
        or region.startswith("af-")
        or region.startswith("il-")
    ):
        return "eu-central-1"
    return "us-east-1"


#: Longest error message a price-refresh warning carries (the rest is cut).
MAX_ERROR_CHARS = 200


def summarize_error(error: BaseException) -> str:
    """One line for a log: a botocore error's operation, code, HTTP status and message, at most ~200 chars.

    Why: a proxy or fake endpoint answers errors with HTML pages (``<!doctype html>...``) that
    botocore puts whole into the message; logs must stay one line per event. An HTML or empty
    message is left out; any other is cut to its first line and :data:`MAX_ERROR_CHARS`.
    """
    if isinstance(error, ClientError):
        details = error.response.get("Error", {}) if isinstance(error.response, dict) else {}
        metadata = error.response.get("ResponseMetadata", {}) if isinstance(error.response, dict) else {}
        code = str(details.get("Code") or "Unknown")
        status = metadata.get("HTTPStatusCode")
        message = str(details.get("Message") or "")
        head = f"{error.operation_name} failed: {code}" + (f" (HTTP {status})" if status else "")
    else:
        message = str(error)
        head = type(error).__name__
    lines = message.strip().splitlines()
    first = lines[0].strip() if lines else ""
    if not first or first.startswith("<"):
        return head + (" (HTML error page omitted)" if first.startswith("<") else "")
    if len(first) > MAX_ERROR_CHARS or len(lines) > 1:
        first = first[:MAX_ERROR_CHARS].rstrip() + "..."
    return f"{head}: {first}"


def get_products_filters(region: str) -> list[dict[str, str]]:
    """``Filters`` of Pricing ``GetProducts`` for Linux, shared-tenancy, on-demand EC2 in ``region``."""
    fields = {
        "regionCode": region,
        "serviceCode": "AmazonEC2",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def parse_price_list(price_list: Iterable[str | Mapping[str, Any]]) -> dict[str, float]:
    """Instance type -> on-demand USD per hour from ``PriceList`` entries (JSON strings or dicts).

    Entries without an instance type or a positive USD price are skipped; when several entries
    price one type the lowest wins (they differ only in licence terms we filtered on).
    """
    prices: dict[str, float] = {}
    for entry in price_list:
        document = json.loads(entry) if isinstance(entry, str) else entry
        instance_type = document.get("product", {}).get("attributes", {}).get("instanceType")
        if not instance_type:
            continue
        for term in document.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                try:
                    usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                except ValueError:
                    continue
                if usd > 0 and (instance_type not in prices or usd < prices[instance_type]):
                    prices[str(instance_type)] = usd
    return prices


def parse_spot_price_history(history: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Instance type -> zone -> the latest spot price (USD per hour) from SpotPriceHistory items."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for item in history:
        key = (str(item["InstanceType"]), str(item["AvailabilityZone"]))
        stamp = item.get("Timestamp")
        when = stamp if isinstance(stamp, datetime) else datetime.min.replace(tzinfo=UTC)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:
            price = float(item["SpotPrice"])
        except (KeyError, ValueError):
            continue
        if key not in latest or when > latest[key][0]:
            latest[key] = (when, price)
    result: dict[str, dict[str, float]] = {}
    for (instance_type, zone), (_, price) in sorted(latest.items()):
        result.setdefault(instance_type, {})[zone] = price
    return result


class PricingProvider:
    """The current :class:`PriceBook` of a region, refreshed on demand or by a background thread.

    ``pricing``: a Pricing API client or None (API off); ``ec2``: for spot prices.
    """

    def __init__(
        self,
        region: str,
        ec2: Any,
        pricing: Any | None,
        clock: Clock,
        pricing_file: str | None = None,
        on_demand_interval: float = 12 * 3600.0,
        spot_interval: float = 600.0,
    ) -> None:
        self.region = region
        self._ec2 = ec2
        self._pricing = pricing
        self._clock = clock
        self._static = static_price_book(region)
        self._file = load_pricing_file(pricing_file, region) if pricing_file else None
        self._on_demand: dict[str, float] = {}
        self._spot: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()
        self._book: PriceBook = self._compose()
        self._on_demand_interval = on_demand_interval
        self._spot_interval = spot_interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: set[str] = set()

    # ----------------------------------------------------------------- reads
    def book(self) -> PriceBook:
        """The prices to use now (static table < Pricing API < spot history < pricing file)."""
        with self._lock:
            return self._book

    def _compose(self) -> PriceBook:
        book = self._static
        if self._on_demand:
            book = book.merged(PriceBook(self.region, dict(self._on_demand), {}, "Pricing API"))
        if self._spot:
            book = book.merged(
                PriceBook(self.region, {}, {k: dict(v) for k, v in self._spot.items()}, "spot history")
            )
        if self._file is not None:
            book = book.merged(self._file)
        return book

    # ----------------------------------------------------------------- refreshes
    def refresh_on_demand(self) -> bool:
        """Fetch on-demand prices from the Pricing API; False (prices kept) when it fails or is off."""
        if self._pricing is None:
            return False
        try:
            paginator = self._pricing.get_paginator("get_products")
            entries: list[str] = []
            for page in paginator.paginate(
                ServiceCode="AmazonEC2", Filters=get_products_filters(self.region), FormatVersion="aws_v1"
            ):
                entries.extend(page.get("PriceList", []))
            prices = parse_price_list(entries)
        except (ClientError, BotoCoreError, ValueError) as error:
            self._failed("on-demand", error)
            return False
        if not prices:
            self._failed("on-demand", ValueError("the Pricing API returned no EC2 prices"))
            return False
        with self._lock:
            self._on_demand = prices
            self._book = self._compose()
        self._recovered("on-demand", len(prices))
        return True

    def refresh_spot(self) -> bool:
        """Fetch current spot prices; False (prices kept) when the call fails."""
        try:
            paginator = self._ec2.get_paginator("describe_spot_price_history")
            history: list[Mapping[str, Any]] = []
            for page in paginator.paginate(
                ProductDescriptions=list(LINUX_PRODUCT_DESCRIPTIONS),
                StartTime=datetime.fromtimestamp(self._clock.now(), tz=UTC),
            ):
                history.extend(page.get("SpotPriceHistory", []))
            prices = parse_spot_price_history(history)
        except (ClientError, BotoCoreError) as error:
            self._failed("spot", error)
            return False
        with self._lock:
            self._spot = prices
            self._book = self._compose()
        self._recovered("spot", len(prices))
        return True

    def refresh(self) -> None:
        """Both refreshes, now."""
        self.refresh_on_demand()
        self.refresh_spot()

    def _failed(self, kind: str, error: BaseException) -> None:
        if kind not in self._failing:
            self._failing.add(kind)
            log.warning(
                "Failed to refresh %s prices for %s, keeping the previous ones: %s", kind, self.region,
                summarize_error(error),
            )

    def _recovered(self, kind: str, count: int) -> None:
        self._failing.discard(kind)
        log.info("Refreshed %s prices for %d instance type(s) in %s", kind, count, self.region)

    # ----------------------------------------------------------------- background
    def start(self) -> None:
        """Refresh now and then every interval, on a daemon thread (idempotent)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="groupless-pricing", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _guarded(self, refresh: Callable[[], bool]) -> None:
        try:
            refresh()
        except Exception:  # the loop must survive anything (a bad page, a parser bug); prices stay
            log.exception("Price refresh failed unexpectedly; keeping the previous prices")

    def _run(self) -> None:
        next_on_demand = next_spot = 0.0
        while not self._stop.is_set():
            now = self._clock.monotonic()
            if now >= next_on_demand:
                self._guarded(self.refresh_on_demand)
                next_on_demand = now + self._on_demand_interval
            if now >= next_spot:
                self._guarded(self.refresh_spot)
                next_spot = now + self._spot_interval
            self._stop.wait(max(1.0, min(next_on_demand, next_spot) - self._clock.monotonic()))
