"""Zeus: FIFO, each job at its own energy-optimal clock.

Zeus (You, Chung, Chowdhury, NSDI'23) picks the GPU power limit that minimises its energy-time
cost ``eta * energy + (1 - eta) * MAXPOWER * time`` (ml-energy/zeus: ``zeus_cost`` in
zeus/utils/metric.py, the ``ZeusCost`` selector in zeus/optimizer/power_limit.py, restated in
docs/research_overview/zeus.md). ``eta`` defaults to 0.5 (``GlobalPowerLimitOptimizer``'s
default selector ``ZeusCost(eta_knob=0.5)``, and ``--eta_knob 0.5`` in the NSDI'23
reproduction scripts, examples/research_reproducibility/zeus_nsdi23). MAXPOWER is the highest
power limit times the number of GPUs (``ZeusCost.select``: ``max power_limit * world_size``).

Adapted: the knob is the SM clock instead of the power limit (the clock is what the plan
fixes), swept over every supported clock of the job's GPU type with DSFRO's predicted watts and
samples/s for the job's configuration; per sample, energy = watts / samples_per_second and time
= 1 / samples_per_second, and MAXPOWER = the type's TDP x the job's GPUs. Zeus does not
choose GPU types or counts: scheduling is FIFO's (``fifo.py``). A lower clock also lowers the
predicted watts, so more jobs fit a power budget; when the budget in force drops below what
the running jobs draw, Zeus (which controls clocks) lowers a running job's clock before it
stops it.
"""

from __future__ import annotations

from solver.domain import Config, Job, Shape
from solver.simulate.policies.common import RoundView
from solver.simulate.policies.fifo import FifoPolicy

ETA_KNOB = 0.5
"""Zeus's default eta (ml-energy/zeus, zeus/optimizer/power_limit.py)."""


def zeus_cost_per_sample(c: Config, eta_knob: float, max_power_watts: float) -> float:
    """eta * energy + (1 - eta) * MAXPOWER * time, per sample of configuration c."""
    return (eta_knob * c.watts + (1 - eta_knob) * max_power_watts) / c.samples_per_second


class ZeusPolicy(FifoPolicy):
    """FIFO at each job's Zeus-optimal clock."""

    name = "zeus"

    def __init__(self, eta_knob: float = ETA_KNOB) -> None:
        if not 0.0 <= eta_knob <= 1.0:
            raise ValueError(f"eta_knob must be in [0, 1], got {eta_knob}")
        self.eta_knob = eta_knob
        self._clock: dict[tuple[str, Shape], int] = {}

    def best_config(self, view: RoundView, job: Job, shape: Shape) -> Config | None:
        """The job's configuration of this shape at the clock of least Zeus cost (ties: the
        higher clock)."""
        key = (job.name, shape)
        if key in self._clock:
            return view.config(job, shape, self._clock[key])
        gpu = view.cluster.gpu_types[shape.gpu_type]
        max_power = gpu.tdp_watts * shape.num_gpus
        found = [
            c
            for clock in sorted(gpu.sm_clocks_mhz, reverse=True)
            if (c := view.config(job, shape, clock)) is not None
        ]
        if not found:
            return None
        best = min(found, key=lambda c: zeus_cost_per_sample(c, self.eta_knob, max_power))
        self._clock[key] = best.sm_clock_mhz
        return best

    def options(self, view: RoundView, job: Job) -> list[Config]:
        """FIFO's configurations (type order decided at the top clock), each at its Zeus clock."""
        out = []
        for c in super().options(view, job):
            best = self.best_config(view, job, c.shape)
            out.append(best if best is not None else c)
        return out

    def running_clocks(self, view: RoundView, job: Job) -> list[int]:
        """Its clock, then lower ones: Zeus controls clocks, so a budget drop slows jobs down
        before it stops them."""
        assert job.current is not None
        clock = job.current.sm_clock_mhz
        return [clock, *view.clocks_below(job.current.shape.gpu_type, clock)]
