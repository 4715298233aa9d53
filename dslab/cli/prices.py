"""``dslab prices``: the price table every answer is priced on, each row's date and source, and what --prices
overrides (the answers' footers name it in one line)."""

from __future__ import annotations

from .common import add_command, price_table, print_json


def plain(value: float) -> str:
    """0.00003, not 3e-05."""
    return f"{value:,.6f}".rstrip("0").rstrip(".")


def cmd_prices(args) -> int:
    from ..core.facts.prices import OVERRIDE_HELP
    prices = price_table(args.prices)
    rows = prices.rows()
    if args.json:
        print_json({"date": prices.date, "region": prices.data["region"], "currency": "USD", "on_demand": True,
                    "source": prices.source, "label": prices.label(), "rows": [row.to_dict() for row in rows],
                    "overrides": dict(prices.overrides), "override_help": OVERRIDE_HELP, "notes": [VERSIONS_SAID]})
        return 0
    print(f"price table of {prices.date}, {prices.data['region']}, on-demand, US dollars")
    print(f"its own sources: {prices.source}")
    width = max(len(row.name) for row in rows)
    print(f"  {'price':{width}s} {'value':>10s}  {'unit':18s} {'date':10s}  source")
    for row in rows:
        mark = "+" if row.overridden_by else "*" if row.other_source else " "
        print(f"{mark} {row.name:{width}s} {plain(row.value):>10s}  {row.unit:18s} {row.date:10s}  {row.source}")
    other = sum(1 for row in rows if row.other_source)
    print(f"*: {other} rows from other sources than the table's own pages (a later listing, a secondary source, an "
          "assumption): confirm them, or give your own with --prices")
    if prices.overrides:
        print(f"+: {len(prices.overrides)} rows from {', '.join(sorted(set(prices.overrides.values())))}")
    print(VERSIONS_SAID)
    print(OVERRIDE_HELP)
    return 0


def _versions_said() -> str:
    """The lifecycle the checkpoint prices rest on, from the figures the stacks are built from (facts/storage.py; the
    synthesized templates are held to them by tests/test_stack_assumptions.py)."""
    from ..core.facts.storage import (CHECKPOINT_EXPIRY_DAYS, CHECKPOINT_NONCURRENT_DAYS,
                                      CHECKPOINT_NONCURRENT_MEAN_DAYS, EXPRESS_CHECKPOINT_EXPIRY_DAYS)
    return (f"s3_storage_gb_month also prices the data bucket's noncurrent versions of checkpoints: the bucket is "
            f"versioned, and under checkpoints/ a version expires {CHECKPOINT_NONCURRENT_DAYS} day after the sync "
            f"deletes it ({CHECKPOINT_NONCURRENT_MEAN_DAYS:g} days on average, rounded to midnight UTC); the directory "
            f"bucket keeps none. Checkpoints a stopped run leaves expire after {CHECKPOINT_EXPIRY_DAYS} days in the "
            f"data bucket and {EXPRESS_CHECKPOINT_EXPIRY_DAYS} in the directory bucket (not priced: a run that ends "
            "deletes them)")


VERSIONS_SAID = _versions_said()


def register(sub) -> None:
    p = add_command(sub, "prices", cmd_prices,
                    "The price table every estimate, recommendation, size and report is priced on: each row's value, "
                    "unit, date and source, the rows that come from other sources than AWS's pricing pages, and what "
                    "--prices overrides.",
                    "dslab prices --prices my-prices.yaml")
    p.add_argument("--prices", help="YAML file overriding prices: its rows are marked + with the file as their source")
    p.add_argument("--json", action="store_true", help="every row with its date and source, and the table's label")
