"""The grid in the simulator (solver.simulate.grid, carbon_metrics, grid_cli): the schedule
file, the forecast the requests carry, the carbon of a run at an equal horizon, and DSFRO
deferring a job to a cleaner hour where carbon-blind DSFRO starts it at once."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.validation.common import Collector
from solver.app.validation.grid import check_grid
from solver.simulate.core import SimJob, SimulationError, TraceJob
from solver.simulate.grid import GridFileError, GridSettings, load_grid
from solver.simulate.grid_cli import add_grid, grid_of, with_tweaks
from solver.simulate.metrics import Summary, equal_horizon, summarize
from solver.simulate.policies import make_policy
from solver.simulate.settings import EngineSettings
from tests.test_simulate_engine import measured_job, run, two_gpu_cluster

HOUR = 3600.0


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.csv"
    path.write_text(text)
    return path


def test_the_schedule_is_read_from_its_start_row_for_its_days(tmp_path: Path) -> None:
    rows = "".join(f"2020-01-01 {h:02d}:00:00,{100 + h},{0.1 * h}\n" for h in range(24))
    path = _csv(tmp_path, "time,carbon_g_per_kwh,price_per_kwh\n" + rows)
    grid = load_grid(path, "2020-01-01T05:00:00", days=3 / 24)
    assert grid.carbon_g_per_kwh == (105.0, 106.0, 107.0)
    assert grid.price_per_kwh == pytest.approx((0.5, 0.6, 0.7))
    assert grid.source == "grid.csv from 2020-01-01 05:00:00"


def test_a_half_hourly_schedule_is_read_as_the_hours_it_covers(tmp_path: Path) -> None:
    """Half-hourly rows (as grid operators publish them) were read as one hour a row: a day
    became two, and every hour's intensity fell at another time."""
    rows = "".join(
        f"2020-01-01 {h // 2:02d}:{30 * (h % 2):02d}:00+00:00,{100 + 10 * h}\n" for h in range(6)
    )
    grid = load_grid(_csv(tmp_path, "time,carbon_g_per_kwh\n" + rows), days=1)
    assert grid.carbon_g_per_kwh == pytest.approx((105.0, 125.0, 145.0))


def test_a_missing_hour_is_the_row_before_continued(tmp_path: Path) -> None:
    """A row lasts until the next starts (as on the wire): the hour after it is not lost, and
    the rows after it keep their own hours."""
    text = "time,carbon_g_per_kwh,price_per_kwh\n"
    text += "2020-01-01 00:00:00,100,1\n2020-01-01 02:00:00,300,3\n2020-01-01 02:30:00,500,5\n"
    grid = load_grid(_csv(tmp_path, text), days=1)
    assert grid.carbon_g_per_kwh == pytest.approx((100.0, 100.0, 400.0))
    assert grid.price_per_kwh == pytest.approx((1.0, 1.0, 4.0))


@pytest.mark.parametrize(
    ("text", "start", "message"),
    [
        ("time,carbon\n2020-01-01 00:00:00,1\n", None, "column 'carbon_g_per_kwh' missing"),
        ("time,carbon_g_per_kwh\n2020-01-01 00:00:00,abc\n", None, "grid.csv:2: carbon_g_per_kwh"),
        ("time,carbon_g_per_kwh\n2020-01-01 00:00:00,-3\n", None, "must be in [0, 5000]"),
        ("time,carbon_g_per_kwh\nnoon,3\n", "2020-01-01", "grid.csv:2: time 'noon'"),
        ("time,carbon_g_per_kwh\n2020-01-01 00:00:00,3\n", "2021-01-01", "no row at or after"),
        ("time,carbon_g_per_kwh\n2020-01-01 00:00:00,3\n", "1999-01-01", "before its first row"),
        ("time,carbon_g_per_kwh\n", None, "no rows"),
    ],
)
def test_a_bad_schedule_names_its_row_and_column(
    tmp_path: Path, text: str, start: str | None, message: str
) -> None:
    with pytest.raises(GridFileError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_grid(_csv(tmp_path, text), start)


def test_negative_prices_are_read_as_surplus_hours(tmp_path: Path) -> None:
    path = _csv(tmp_path, "time,carbon_g_per_kwh,price_per_kwh\n2020-01-01 00:00:00,50,-0.02\n")
    assert load_grid(path).price_per_kwh == (-0.02,)


def test_carbon_is_integrated_hour_by_hour_and_wraps_around() -> None:
    grid = GridSettings((100.0, 300.0), price_per_kwh=(1.0, 2.0))
    # 1 kW from 0.5 h to 2.5 h: 0.5 kWh at 100, 1 kWh at 300, 0.5 kWh at 100 (wrapped)
    assert grid.carbon_g(1000.0, 0.5 * HOUR, 2.5 * HOUR) == pytest.approx(400.0)
    assert grid.cost(1000.0, 0.5 * HOUR, 2.5 * HOUR) == pytest.approx(3.0)
    assert GridSettings((100.0,)).cost(1000.0, 0.0, HOUR) is None


def test_the_forecast_starts_now_as_measured_and_then_at_each_hour() -> None:
    grid = GridSettings(tuple(float(100 + h) for h in range(72)), forecast_hours=3)
    f = grid.forecast(1.5 * HOUR, seed=7)
    starts = [p.start.ToNanoseconds() / 1e9 for p in f.points]
    assert starts == [0.0, 0.5 * HOUR, 1.5 * HOUR, 2.5 * HOUR]
    assert f.points[0].carbon_g_per_kwh == 101.0  # the hour now, measured
    later = [p.carbon_g_per_kwh for p in f.points[1:]]
    assert later != [102.0, 103.0, 104.0]  # with its error
    assert all(abs(v / t - 1) < 0.5 for v, t in zip(later, (102, 103, 104), strict=True))
    same_hour = grid.forecast(1.9 * HOUR, seed=7).points[1]
    assert same_hour.carbon_g_per_kwh == later[0]  # made in the same hour: the same forecast
    assert grid.forecast(1.5 * HOUR, seed=8).points[1].carbon_g_per_kwh != later[0]
    assert not f.HasField("saving_per_delay") and not f.HasField("min_saving")
    priced = dataclasses.replace(grid, saving_per_delay=0.5, min_saving=0.2).forecast(0.0, seed=7)
    assert priced.saving_per_delay == 0.5
    assert priced.min_saving == pytest.approx(0.2)
    exact = dataclasses.replace(grid, forecast_error=0.0).forecast(1.5 * HOUR, seed=7)
    assert [p.carbon_g_per_kwh for p in exact.points] == [101.0, 102.0, 103.0, 104.0]
    c = Collector()
    cluster = two_gpu_cluster()
    cluster.grid.CopyFrom(f)
    check_grid(c, cluster)
    assert c.out == []


def _deadline_job(name: str, submit: float, duration: float, deadline: float) -> SimJob:
    job = measured_job(name, submit, duration)
    trace = dataclasses.replace(job.trace, deadline_s=deadline)
    return dataclasses.replace(job, trace=trace)


DIRTY_THEN_CLEAN = GridSettings((400.0, 400.0, 100.0, 100.0, 100.0, 400.0), forecast_error=0.0)
"""Dirty for two hours, then clean for three: a one-hour job submitted at 0 is cleanest from 2 h."""


def test_dsfro_defers_a_job_to_the_clean_hours_and_blind_dsfro_does_not() -> None:
    jobs = [_deadline_job("a", 0.0, HOUR, deadline=6 * HOUR)]
    logs = {
        p: run(jobs, make_policy(p), grid=DIRTY_THEN_CLEAN)
        for p in ("dsfro-heuristic", "dsfro-carbon-blind")
    }
    aware = {j.job_id: j for j in logs["dsfro-heuristic"].jobs}["a"]
    blind = {j.job_id: j for j in logs["dsfro-carbon-blind"].jobs}["a"]
    assert blind.first_start_s == 0.0
    assert aware.first_start_s is not None and 2 * HOUR <= aware.first_start_s < 2.5 * HOUR
    assert aware.finish_s is not None and aware.finish_s <= 6 * HOUR  # its deadline held
    aware_s, blind_s = equal_horizon([summarize(log) for log in logs.values()])
    assert aware_s.horizon_s == blind_s.horizon_s
    assert aware_s.carbon_horizon_kg is not None and blind_s.carbon_horizon_kg is not None
    # the same energy; the job's draw above its GPU's idle 50 W, 0.05 kWh, moved from 400 to
    # 100 gCO2/kWh: 15 g less
    assert aware_s.energy_horizon_kwh == pytest.approx(blind_s.energy_horizon_kwh)
    saved = blind_s.carbon_horizon_kg - aware_s.carbon_horizon_kg
    assert saved == pytest.approx((0.1 - 0.05) * (0.4 - 0.1))


def test_a_job_without_slack_starts_at_once() -> None:
    jobs = [_deadline_job("a", 0.0, HOUR, deadline=1.2 * HOUR)]
    log = run(jobs, make_policy("dsfro-heuristic"), grid=DIRTY_THEN_CLEAN)
    assert log.jobs[0].first_start_s == 0.0


def test_the_runs_carbon_is_its_draw_at_each_hours_intensity_padded_to_the_horizon() -> None:
    grid = GridSettings((100.0, 200.0, 300.0, 400.0), forecast_error=0.0)
    log = run([measured_job("a", 0.0, 1.5 * HOUR)], make_policy("fifo"), grid=grid)
    summary = summarize(log)
    expected = sum(grid.carbon_g(s.true_watts, s.start_s, s.end_s) for s in log.power) / 1000
    assert summary.carbon_kg == pytest.approx(expected)
    assert summary.carbon_kg is not None and summary.carbon_kg > 0
    padded = summary.at_horizon(summary.span_s + 2 * HOUR)
    idle = grid.carbon_g(log.idle_watts, log.end_s, log.end_s + 2 * HOUR) / 1000
    assert padded.carbon_horizon_kg == pytest.approx(summary.carbon_kg + idle)
    again = Summary.from_dict(padded.to_dict())
    assert again.grid == grid and again.carbon_horizon_kg == padded.carbon_horizon_kg


def test_without_a_grid_there_are_no_carbon_figures() -> None:
    summary = summarize(run([measured_job("a", 0.0, 100.0)], make_policy("fifo")))
    assert summary.carbon_kg is None and summary.carbon_horizon_kg is None


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_grid(p)
    return p.parse_args(list(argv))


def test_the_flags_need_a_grid_and_name_a_bad_file(tmp_path: Path) -> None:
    assert grid_of(_args()) is None
    assert grid_of(_args("--grid-start", "2020-01-01")) == "--grid-start needs --grid"
    tweaks = grid_of(_args("--min-saving", "0.2", "--scale-energy"))
    assert tweaks == {"min_saving": 0.2, "scale_energy": True}  # for the scenario's own grid
    priced = grid_of(_args("--saving-per-delay", "0.5"))
    assert priced == {"saving_per_delay": 0.5}
    assert isinstance(tweaks, dict)
    with pytest.raises(SimulationError, match="--min-saving, --scale-energy: the scenario has no"):
        with_tweaks(EngineSettings(), tweaks)
    tweaked = with_tweaks(EngineSettings(grid=GridSettings((1.0,))), tweaks).grid
    assert tweaked is not None and tweaked.min_saving == 0.2 and tweaked.scale_energy
    bad = _csv(tmp_path, "time,carbon_g_per_kwh\n2020-01-01 00:00:00,x\n")
    message = grid_of(_args("--grid", str(bad)))
    assert isinstance(message, str) and "grid.csv:2: carbon_g_per_kwh 'x'" in message
    good = _csv(tmp_path, "time,carbon_g_per_kwh\n2020-01-01 00:00:00,80\n")
    grid = grid_of(_args("--grid", str(good), "--forecast-error", "0", "--scale-energy"))
    assert isinstance(grid, GridSettings)
    assert grid.forecast_error == 0.0 and grid.scale_energy and grid.carbon_g_per_kwh == (80.0,)
    with pytest.raises(SystemExit):
        _args("--grid", str(good), "--forecast-error", "nan")


def test_trace_jobs_keep_their_deadlines() -> None:
    job = _deadline_job("a", 5.0, HOUR, deadline=3 * HOUR)
    assert isinstance(job.trace, TraceJob) and job.trace.deadline_s == 3 * HOUR


def test_the_comparison_gives_carbon_ratios_only_where_runs_have_a_grid() -> None:
    from solver.simulate.outputs import comparison_markdown, comparison_rows

    grid = GridSettings((100.0, 300.0), forecast_error=0.0)
    jobs = [measured_job("a", 0.0, HOUR)]
    with_grid = [summarize(run(jobs, make_policy(p), grid=grid)) for p in ("fifo", "las")]
    rows = comparison_rows(with_grid, baselines=["fifo"])
    assert "kg CO2 at equal horizon / fifo" in comparison_markdown(rows, ["fifo"])
    las = next(r for r in rows if r.policy == "las")
    assert las.ratios[("carbon_horizon_kg", "fifo")] == pytest.approx(1.0)
    without = [summarize(run(jobs, make_policy(p))) for p in ("fifo", "las")]
    text = comparison_markdown(comparison_rows(without, ["fifo"]), ["fifo"])
    assert "kg CO2 at equal horizon / fifo" not in text and "mean JCT (s) / fifo" in text


def test_a_schedule_that_has_ended_gives_no_forecast() -> None:
    """solver.wire.grid_forecast_at: a row lasts until the next; the last one as long as the
    one before it."""
    from datetime import datetime, timedelta

    from solver.wire import GridHour, grid_forecast_at

    t0 = datetime(2026, 1, 1)
    rows = [GridHour(t0 + timedelta(hours=2 * k), 100.0 + k) for k in range(3)]
    assert grid_forecast_at(rows, t0 - timedelta(seconds=1)) is None
    inside = grid_forecast_at(rows, t0 + timedelta(hours=5, minutes=30), hours=1)
    assert inside is not None and [p.carbon_g_per_kwh for p in inside.points] == [102.0]
    assert grid_forecast_at(rows, t0 + timedelta(hours=6)) is None  # 04:00 + 2 h: over


def test_schedule_times_with_an_offset_are_read_in_utc(tmp_path: Path) -> None:
    """``12:00+09:00`` is 03:00 UTC (before, 12:00: a schedule in a site's local time with its
    offset was read nine hours late); a byte-order mark before the header is allowed."""
    from datetime import datetime

    from solver.wire import read_grid_schedule

    path = tmp_path / "tokyo.csv"
    rows = "time,carbon_g_per_kwh\n2026-12-07T12:00:00+09:00,600\n"
    rows += "2026-12-07T13:00:00+09:00,30\n"
    path.write_text("\ufeff" + rows, encoding="utf-8")
    got = read_grid_schedule(path)
    assert [r.start for r in got] == [datetime(2026, 12, 7, 3), datetime(2026, 12, 7, 4)]
    assert [r.carbon_g_per_kwh for r in got] == [600.0, 30.0]


def test_a_schedule_of_minutes_gives_a_forecast_a_request_holds() -> None:
    """A one-minute schedule (as some grid data services publish) and the Slurm adapter's 48
    hours gave 2,881 points: every round's request was refused (at most MAX_GRID_POINTS). Now
    its hours, each the mean of its minutes."""
    from datetime import datetime, timedelta

    from solver.wire import MAX_GRID_POINTS, GridHour, grid_forecast_at

    t0 = datetime(2020, 1, 1)
    rows = [
        GridHour(t0 + timedelta(minutes=m), 100.0 + m % 60, 0.01 * (m % 60)) for m in range(4320)
    ]
    forecast = grid_forecast_at(rows, t0 + timedelta(minutes=30), hours=48)
    assert forecast is not None and len(forecast.points) == 49 <= MAX_GRID_POINTS
    c = Collector()
    cluster = pb.ClusterSnapshot()
    cluster.grid.CopyFrom(forecast)
    check_grid(c, cluster)
    assert c.out == []
    starts = [p.start.ToTimedelta().total_seconds() for p in forecast.points]
    assert starts == [k * 3600.0 for k in range(49)]
    # From :30, an hour holds minutes 30-59 then 0-29: a mean of 129.5 whatever the hour; the
    # last starts at 48 h and holds the one row that starts then (it lasts a minute, as the
    # one before it).
    carbon = [p.carbon_g_per_kwh for p in forecast.points]
    assert carbon == pytest.approx([129.5] * 48 + [130.0])
    assert forecast.points[3].price_per_kwh == pytest.approx(0.295)
