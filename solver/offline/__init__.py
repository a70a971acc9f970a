"""Offline tools: instance generation, batches of solves, reports, weight sweeps and the
calibration of the performance model against measured data."""
