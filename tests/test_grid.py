"""The grid forecast as data (solver.grid): where its periods end, and time-weighted means of
its carbon intensity over windows, clipped to what the forecast covers."""

from __future__ import annotations

import pytest

from solver.grid import LONE_PERIOD_SECONDS, GridForecast, GridPoint

H = 3600.0


def grid(*points: tuple[float, float]) -> GridForecast:
    """A forecast from (start in hours, gCO2/kWh) pairs."""
    return GridForecast(tuple(GridPoint(s * H, c) for s, c in points))


THREE_HOURS = grid((0, 400.0), (1, 100.0), (2, 200.0))


def test_a_lone_point_lasts_one_hour() -> None:
    g = grid((0, 300.0))
    assert LONE_PERIOD_SECONDS == H
    assert g.end_seconds == H
    assert [(a, b) for a, b, _ in g.periods()] == [(0.0, H)]


def test_each_period_ends_at_the_next_start_and_the_last_lasts_as_long_as_the_one_before() -> None:
    g = grid((0, 1.0), (0.5, 2.0), (2, 3.0))
    assert [(a / H, b / H) for a, b, _ in g.periods()] == [(0, 0.5), (0.5, 2), (2, 3.5)]
    assert g.end_seconds == 3.5 * H
    assert [p.carbon_g_per_kwh for _, _, p in g.periods()] == [1.0, 2.0, 3.0]


def test_now_is_the_first_point() -> None:
    assert THREE_HOURS.now_g_per_kwh == 400.0


def test_the_mean_is_weighted_by_time_within_periods() -> None:
    assert THREE_HOURS.mean_carbon(0, 2 * H) == pytest.approx(250.0)
    # half an hour at 400, half at 100
    assert THREE_HOURS.mean_carbon(0.5 * H, 1.5 * H) == pytest.approx(250.0)
    # half an hour at 400, an hour at 100: (0.5 * 400 + 1 * 100) / 1.5
    assert THREE_HOURS.mean_carbon(0.5 * H, 2 * H) == pytest.approx(200.0)
    # periods of unequal length: 0.5 h at 1, 1.5 h at 2, 1.5 h at 3 over 3.5 h
    uneven = grid((0, 1.0), (0.5, 2.0), (2, 3.0))
    assert uneven.mean_carbon(0, 3.5 * H) == pytest.approx((0.5 + 3 + 4.5) / 3.5)


def test_a_window_past_the_end_counts_only_its_covered_part() -> None:
    assert THREE_HOURS.mean_carbon(H, 10 * H) == pytest.approx(150.0)
    assert THREE_HOURS.mean_carbon(2 * H, 100 * H) == pytest.approx(200.0)


def test_a_window_starting_at_or_past_the_end_is_unknown() -> None:
    assert THREE_HOURS.mean_carbon(3 * H, 4 * H) is None
    assert THREE_HOURS.mean_carbon(10 * H, 11 * H) is None
    assert THREE_HOURS.mean_carbon(3 * H - 1, 4 * H) == pytest.approx(200.0)


def test_an_empty_window_is_the_intensity_at_its_start() -> None:
    assert THREE_HOURS.mean_carbon(1.5 * H, 1.5 * H) == 100.0
    assert THREE_HOURS.mean_carbon(H, H) == 100.0  # a period's start belongs to it
    assert THREE_HOURS.mean_carbon(2.5 * H, H) == 200.0  # end before start: also empty
    assert THREE_HOURS.mean_carbon(0, 0) == 400.0


def test_defaults_are_the_documented_ones() -> None:
    g = grid((0, 1.0))
    assert (g.min_saving, g.scale_energy) == (0.1, False)
    assert g.points[0].price_per_kwh is None


def _looped_mean(g: GridForecast, start: float, end: float) -> float | None:
    """mean_carbon by its definition: a pass over the periods' overlaps with the window."""
    if start >= g.end_seconds:
        return None
    end = min(end, g.end_seconds)
    if end <= start:
        return next(p.carbon_g_per_kwh for a, b, p in g.periods() if a <= start < b)
    weighted = sum(max(min(b, end) - max(a, start), 0.0) * p.carbon_g_per_kwh
                   for a, b, p in g.periods())  # fmt: skip
    return weighted / (end - start)


@pytest.mark.parametrize("seed", range(5))
def test_the_mean_is_the_looped_definition_on_random_forecasts(seed: int) -> None:
    """mean_carbon integrates by prefix sums (a month of periods, thousands of jobs a round):
    it agrees with the pass over the periods, inside, across and past the forecast."""
    import random

    rnd = random.Random(seed)
    starts = [0.0]
    for _ in range(rnd.randrange(0, 60)):
        starts.append(starts[-1] + rnd.choice([900.0, 1800.0, H, rnd.uniform(1.0, 2 * H)]))
    g = GridForecast(tuple(GridPoint(s, rnd.uniform(0.0, 900.0)) for s in starts))
    for _ in range(200):
        a = rnd.uniform(0.0, g.end_seconds * 1.1)
        b = a + rnd.choice([0.0, rnd.uniform(0.0, 3 * H), rnd.uniform(0.0, g.end_seconds)])
        want = _looped_mean(g, a, b)
        got = g.mean_carbon(a, b)
        assert (got is None) == (want is None), (a, b)
        if want is not None:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9), (a, b)
    assert g.mean_carbon(starts[-1], starts[-1]) == g.points[-1].carbon_g_per_kwh
