"""The dashboards' formats, colours and figure rules, with hand values (no lake): dashboards/format.py, figures.py."""

import datetime as dt

import polars as pl
import pytest

from gpuledger.dashboards import figures, ui
from gpuledger.dashboards import format as fmt

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    "got,want",
    [
        (fmt.duration(5400), "1.5 h"),
        (fmt.wait(5400), "90.0 min"),
        (fmt.wait(45), "0.8 min"),
        (fmt.usd(1234.5), "1,234.50 USD"),
        (fmt.gpu_hours(1987.44), "1,987.4 GPU-h"),
        (fmt.pct(12.345), "12.3 %"),
        (fmt.shown("queue_s", 5400), "90.0 min"),  # a wait: minutes everywhere
        (fmt.shown("run_s", 5400), "1.5 h"),  # a run time: hours everywhere
        (fmt.shown("efficiency", 0.5), "50.0 %"),  # a fraction shown as a percentage
        (fmt.shown("cost_usd", 1234.5), "1,234.50 USD"),
        (fmt.shown("jobs", 1693), "1,693"),
        (fmt.shown("tenant", "vision"), "vision"),
        (fmt.shown("queue_s", None), "—"),
        (fmt.utc(dt.datetime(2026, 11, 1, 14, 5, tzinfo=UTC)), "2026-11-01 14:05 UTC"),
        (fmt.utc(dt.datetime(2026, 11, 1, 7, 5, tzinfo=dt.timezone(dt.timedelta(hours=-7)))), "2026-11-01 14:05 UTC"),
        (fmt.number(None), "—"),
        (fmt.number(float("nan")), "—"),
    ],
)
def test_numbers_are_written_one_way(got, want):
    assert got == want


@pytest.mark.parametrize(
    "name,header",
    [
        ("queue_s", "Wait (min)"),
        ("wait_p90_min", "p90 wait (min)"),
        ("idle_h", "Idle for (h)"),
        ("run_s", "Run time (h)"),
        ("idle_gpu_hours", "Idle (GPU-h)"),
        ("cost_usd", "Own jobs' cost (USD)"),
        ("idle_share_usd", "Idle capacity share (USD)"),
        ("total_usd", "Total cost (USD)"),
        ("gpus", "GPUs"),  # not "GPUs (GPUs)"
        ("peak_demand_pct_of_supply", "Peak demand, share of supply (%)"),
        ("pending_jobs_max", "Waiting jobs (hour's max)"),
        ("submitted_at", "Submitted (UTC)"),
        ("backtest_mase", "MASE"),
    ],
)
def test_a_header_is_a_label_and_its_unit(name, header):
    assert fmt.header(name) == header


def test_every_registered_header_reads_as_words():
    for name, col in fmt.REGISTRY.items():
        assert "_" not in col.header and col.header[0] not in "_ ", name


def test_waits_are_minutes_and_durations_hours_everywhere():
    units = {name: c.unit.symbol for name, c in fmt.REGISTRY.items()}
    waits = [n for n in units if "wait" in n or n == "queue_s" or n in ("p10", "p25", "p50", "p75", "p90", "mean")]
    assert waits and {units[n] for n in waits} == {"min"}
    assert {units[n] for n in ("run_s", "held_s", "idle_s", "idle_h")} == {"h"}
    assert {units[n] for n in fmt.REGISTRY if n.endswith("_usd")} == {"USD"}
    assert {units[n] for n in fmt.REGISTRY if n.endswith("_gpu_hours") or n == "gpu_hours"} == {"GPU-h"}


def test_an_unknown_column_keeps_its_name_and_is_logged(caplog):
    assert fmt.header("new_column_s") == "new_column_s"
    assert "new_column_s" in caplog.text and "has no label" in caplog.text


def test_a_month_or_range_the_figures_do_not_cover_says_partial():
    nov, oct_ = dt.date(2026, 11, 1), dt.date(2026, 10, 1)
    data_to = dt.datetime(2026, 11, 3, 14, tzinfo=UTC)
    assert fmt.month(nov, data_to) == "2026-11 to 3 Nov 14:00 UTC (partial)"
    assert fmt.month(oct_, data_to) == "2026-10"
    assert fmt.month(oct_, data_to, dt.date(2026, 10, 5)) == "2026-10 from 5 Oct (partial)"
    assert fmt.month(dt.date(2026, 12, 1), data_to) == "2026-12 (no data)"
    assert fmt.period(dt.date(2026, 10, 5), dt.date(2026, 11, 3), data_to) == (
        "2026-10-05 to 2026-11-03 (last day partial, to 14:00 UTC)"
    )
    assert fmt.period(dt.date(2026, 10, 5), dt.date(2026, 11, 2), data_to) == "2026-10-05 to 2026-11-02"
    assert fmt.period(dt.date(2026, 10, 5), dt.date(2026, 11, 9), data_to).endswith(
        "(partial: figures to 2026-11-03 14:00 UTC)"
    )


# -- the grid ---------------------------------------------------------------------------------------------------
def test_the_grid_holds_numbers_in_the_headers_unit_and_formats_them_in_the_browser():
    frame = pl.DataFrame(
        {
            "job_id": ["a", "b"],
            "queue_s": [5400.0, None],
            "efficiency": [0.5, 0.25],
            "submitted_at": [dt.datetime(2026, 11, 1, 14, 5, tzinfo=UTC)] * 2,
            "over": [True, False],
        }
    )
    box = ui.table("t", frame.rename({"over": "status"}))
    button, grid = box.children
    assert button.className == "csv-export" and getattr(button, "data-grid") == "t"
    assert [d["headerName"] for d in grid.columnDefs] == ["Job", "Wait (min)", "Busy share of allocated (%)",
                                                          "Submitted (UTC)", "Status"]  # fmt: skip
    assert grid.rowData[0] == {
        "job_id": "a",
        "queue_s": 90.0,
        "efficiency": 50.0,
        "submitted_at": "2026-11-01 14:05",
        "status": "yes",
    }
    assert grid.rowData[1]["queue_s"] is None
    wait = grid.columnDefs[1]
    assert wait["valueFormatter"]["function"] == "params.value == null ? '' : d3.format(',.1f')(params.value)"
    assert wait["useValueFormatterForExport"] is False and wait["filter"] == "agNumberColumnFilter"
    assert grid.dashGridOptions["pagination"] is False  # 2 rows: one page


def test_an_empty_table_is_a_sentence():
    p = ui.table("t", pl.DataFrame(schema={"job_id": pl.String}))
    assert p.id == "t" and p.children == "None in this range."


# -- figures ----------------------------------------------------------------------------------------------------
def test_a_colour_is_a_function_of_the_name_alone():
    assert figures.colour("vision") == figures.colour("vision") == figures.colour("eu-1 / vision")
    assert figures.colour("vision") in figures.PALETTE
    tenants = ["nlp", "platform", "recsys", "research", "vision"]  # the simulated fleet's: all apart
    assert len({figures.colour(t) for t in tenants}) == len(tenants)
    assert figures.colour("deny") == figures.SERIES["deny"]


def test_categories_come_in_reading_order():
    assert figures.ordered([">8", "1", "3-4", "<1", "2", "5-8"]) == ["<1", "1", "2", "3-4", "5-8", ">8"]
    assert figures.ordered(["vision", None, "nlp", "vision"]) == ["nlp", "vision", None]


def _frame(groups: int, days: int = 5) -> pl.DataFrame:
    day0 = dt.datetime(2026, 10, 1, tzinfo=UTC)
    return pl.DataFrame(
        [
            {"day": day0 + dt.timedelta(days=d), "who": f"t{g}", "a": float(g + d), "b": float(g)}
            for g in range(groups)
            for d in reversed(range(days))  # given out of order: drawn in time order
        ]
    )


def _lines_per_plot(fig) -> int:
    per: dict = {}
    for t in fig.data:
        key = (t.xaxis or "x", t.yaxis or "y")
        per[key] = per.get(key, 0) + 1
    return max(per.values())


def test_up_to_six_lines_share_a_plot_and_more_are_small_multiples():
    one = figures.lines(_frame(6), "day", {"a": "a"}, "t", "GPUs", by="who")
    assert len(one.data) == 6 and _lines_per_plot(one) == 6
    assert [t.name for t in one.data] == [f"t{g}" for g in range(6)]
    assert [t.line.color for t in one.data] == [figures.colour(f"t{g}") for g in range(6)]
    assert one.data[0].x == tuple(sorted(one.data[0].x))
    many = figures.lines(_frame(9), "day", {"a": "a"}, "t", "GPUs", by="who")
    assert len(many.data) == 9 and _lines_per_plot(many) == 1
    assert [a.text for a in many.layout.annotations] == [f"t{g}" for g in range(9)]  # a panel per group
    # Several measures per group: a panel per group at once, each measure told apart by its dash.
    two = figures.lines(_frame(3), "day", {"a": "a", "b": "b"}, "t", "GPUs", by="who")
    assert _lines_per_plot(two) == 2 and {t.line.dash for t in two.data} == {"solid", "dot"}


def test_a_single_point_is_a_marker_and_nothing_is_a_sentence():
    fig = figures.lines(_frame(1, days=1), "day", {"a": "a"}, "t", "GPUs", by="who")
    assert fig.data[0].mode == "lines+markers"
    # One day on the axis: a day either side, ticks a day apart (not a millisecond labelled 23:59:59.9995).
    day = _frame(1, days=1)["day"][0]
    assert list(fig.layout.xaxis.range) == [day - dt.timedelta(days=1), day + dt.timedelta(days=1)]
    assert fig.layout.xaxis.dtick == 86_400_000
    assert figures.lines(_frame(1, days=2), "day", {"a": "a"}, "t", "GPUs").layout.xaxis.range is None
    assert figures.lines(_frame(1, days=30), "day", {"a": "a"}, "t", "GPUs").data[0].mode == "lines"
    nothing = figures.lines(_frame(0), "day", {"a": "a"}, "Idle per day", "GPU-h")
    assert figures.is_empty(nothing)
    nulls = _frame(2).with_columns(pl.lit(None, pl.Float64).alias("a"))
    assert figures.is_empty(figures.lines(nulls, "day", {"a": "a"}, "t", "GPUs", by="who"))
    p = ui.graph("g", nothing)
    assert p.id == "g" and p.children == "Idle per day: no data in this range."
    assert figures.is_empty(figures.bars(pl.DataFrame(schema={"x": pl.String, "y": pl.Float64}), "x", {"y": "y"}, "t",
                                         "USD", "x"))  # fmt: skip


def test_bars_and_boxes_keep_each_tenants_colour_in_sorted_order():
    cost = pl.DataFrame({"tenant": ["vision", "nlp"], "own": [2.0, 1.0], "idle": [1.0, 1.0]})
    fig = figures.bars(cost, "tenant", {"own": "own jobs", "idle": "idle share"}, "t", "USD", "tenant", stacked=True)
    assert fig.data[0].x == ("nlp", "vision")
    assert list(fig.data[0].marker.color) == [figures.colour("nlp"), figures.colour("vision")]
    assert fig.data[1].marker.pattern.shape == "/"  # the idle share: the same colour, hatched
    q = pl.DataFrame({"size_bucket": ["3-4", "<1", "1"], **{p: [1.0, 2.0, 3.0] for p in ("p10", "p25", "p50", "p75",
                                                                                            "p90")}})  # fmt: skip
    box = figures.boxes(q, "size_bucket", "t", "wait (min)", "GPUs per job")
    assert list(box.layout.xaxis.categoryarray) == ["<1", "1", "3-4"]
