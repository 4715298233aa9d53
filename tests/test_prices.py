"""The price footer and `dslab prices`: every answer ends with one short line (the table's date, region and how many
rows come from other sources), and `dslab prices` shows every row with its date and source, and what --prices
overrides; --json keeps every detail."""

from __future__ import annotations

import json

import pytest

from dslab.cli import main
from dslab.core.facts.prices import DEFAULT_TABLE, PriceTable

QUESTION = ["--files", "30607", "--bytes", "1.1GB"]


def _out(capsys, *argv) -> str:
    assert main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["estimate", "recommend", "size"])
def test_every_answer_ends_with_one_short_price_line(capsys, command):
    """It was 600-900 characters: the table's whole source and every dated group of rows."""
    last = _out(capsys, command, *QUESTION).rstrip().splitlines()[-1]
    others = sum(1 for row in PriceTable().rows() if row.other_source)
    assert last == f"prices of {DEFAULT_TABLE['date']}, us-east-1, on-demand: {others} rows from other sources: `dslab prices`"
    assert len(last) < 120 and others >= 10   # the ten instance rows added 2026-11-30 at least


def test_a_prices_file_is_named_in_the_line_and_its_rows_in_the_table(capsys, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("date: 2026-12-01\ninstance_hourly:\n  ml.p5.48xlarge: 98.32\ns3_get_per_million: 0.5\n")
    last = _out(capsys, "recommend", *QUESTION, "--prices", prices).rstrip().splitlines()[-1]
    assert last.startswith("prices of 2026-12-01, us-east-1, on-demand: 2 from ") and str(prices) in last
    assert f"`dslab prices --prices {prices}`" in last
    listed = _out(capsys, "prices", "--prices", prices).splitlines()
    given = [line for line in listed if line.startswith("+ ")]
    assert len(given) == 2 and all(str(prices) in line and "2026-12-01" in line for line in given)
    assert any("instance_hourly.ml.p5.48xlarge" in line and "98.32" in line for line in given)
    # A row the file gives is no longer counted among the other sources' (it was one: p5 came from a listing).
    assert f"{sum(1 for row in PriceTable().rows() if row.other_source) - 1} rows from other sources" in last


def test_dslab_prices_lists_every_row_with_its_date_and_source_and_what_prices_overrides(capsys):
    table = PriceTable()
    out = _out(capsys, "prices")
    rows = {line[2:].split()[0]: line for line in out.splitlines()[3:] if line[:1] in " *+" and line[1:2] == " "}
    assert {f"instance_hourly.{t}" for t in table.data["instance_hourly"]} <= set(rows)
    scalars = set(DEFAULT_TABLE) - {"date", "region", "source", "instance_hourly", "dated_rows"}
    assert scalars <= set(rows)
    for itype, dated in table.data["dated_rows"].items():   # rows added later: marked, with their own date and source
        line = rows[f"instance_hourly.{itype}"]
        assert line.startswith("*") and dated["date"] in line and dated["source"][:40] in line
    assert "aws.amazon.com/s3/pricing" in rows["s3_get_per_million"] and not rows["s3_get_per_million"].startswith("*")
    assert rows["fsx_persistent2_1000_gb_month"].startswith("*") and "not confirmed" in rows["fsx_persistent2_1000_gb_month"]
    assert "--prices FILE.yaml" in out and "instance_hourly:" in out


def test_prices_json_keeps_every_detail(capsys):
    data = json.loads(_out(capsys, "prices", "--json"))
    assert data["label"] == PriceTable().label()   # the long label the footer used to print, whole
    assert len(data["rows"]) == len(PriceTable().rows())
    assert all(row["date"] and row["source"] and row["unit"].startswith("$") for row in data["rows"])
    p5 = next(row for row in data["rows"] if row["name"] == "instance_hourly.ml.p5.48xlarge")
    assert p5["other_source"] is True and p5["date"] == "2026-11-30"
    # The answers' own --json keeps the long label too.
    assert json.loads(_out(capsys, "estimate", *QUESTION, "--json"))["question"]["prices"] == PriceTable().label()
