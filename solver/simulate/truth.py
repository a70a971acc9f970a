"""The truth model: how fast a job really trains and how much power it really draws.

Policies see predictions only (the model spec or measured profile in the snapshot, through
``solver.perfmodel``). The simulated cluster runs on this separate truth:

- throughput: a measured profile's own figure where the job has one (the measurement is the
  truth), else the analytic prediction times a per-job error drawn once (lognormal, mean one,
  ``throughput_sigma``);
- power: the prediction times a per-job error drawn once (lognormal, mean one, ``power_sigma``):
  no public table gives a job's watts per configuration, so even measured jobs carry it;
- both times a per-round noise (lognormal, mean one, ``round_sigma``), drawn per job and round;
- on a MIG instance, the job's measured fraction of a GPU bounds what the instance's share
  gives it (``slice_rate``, ``solver.simulate.slicing``).

Errors are mean-one (mu = -sigma^2 / 2) so that the truth is unbiased on average and a policy's
exceedance of the power budget comes from spread, not from a skew built into the simulator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solver.domain import Config, Job, Problem, Shape
from solver.perfmodel.configs import TypeFacts, resolve_config, type_facts
from solver.simulate.core import SimJob
from solver.simulate.slicing import at_fraction, instance_configs

DEFAULT_THROUGHPUT_SIGMA = 0.15
DEFAULT_POWER_SIGMA = 0.15
DEFAULT_ROUND_SIGMA = 0.02
"""Step-time variation from round to round (an assumption of this simulator, configurable)."""


@dataclass(frozen=True)
class TruthSettings:
    throughput_sigma: float = DEFAULT_THROUGHPUT_SIGMA
    power_sigma: float = DEFAULT_POWER_SIGMA
    round_sigma: float = DEFAULT_ROUND_SIGMA


@dataclass(frozen=True)
class Rate:
    """A job's true pace in one configuration for one round."""

    samples_per_second: float
    watts: float
    """All the job's GPUs together."""


def mean_one_lognormal(rng: np.random.Generator, sigma: float) -> float:
    return float(rng.lognormal(-sigma * sigma / 2, sigma)) if sigma > 0 else 1.0


class Truth:
    """True rates per job and configuration; per-job errors drawn once from ``seed``."""

    def __init__(
        self,
        problem: Problem,
        jobs: dict[str, SimJob],
        settings: TruthSettings,
        seed: int,
    ) -> None:
        self.problem = problem
        self.settings = settings
        self._jobs = {j.name: j for j in problem.jobs}
        self._measured = {name: s.measured for name, s in jobs.items()}
        self._fraction = {name: s.gpu_fraction for name, s in jobs.items()}
        self._slices: dict[str, dict[tuple[str, str, int], Config]] = {}
        self._facts: dict[str, TypeFacts] = type_facts(problem.cluster)
        rng = np.random.default_rng([seed, 1])
        self._speed_error: dict[str, float] = {}
        self._power_error: dict[str, float] = {}
        for name in sorted(jobs):  # drawn in name order: independent of arrival order
            self._speed_error[name] = (
                1.0 if jobs[name].measured else mean_one_lognormal(rng, settings.throughput_sigma)
            )
            self._power_error[name] = mean_one_lognormal(rng, settings.power_sigma)
        self._round_rng = np.random.default_rng([seed, 2])
        self._cache: dict[tuple[str, Shape, int], Config | None] = {}

    def predicted(self, job: str, shape: Shape, clock: int) -> Config | None:
        """The prediction policies see for this configuration (None: it cannot run)."""
        key = (job, shape, clock)
        if key not in self._cache:
            self._cache[key] = resolve_config(
                self.problem, self._jobs[job], shape, clock, self._facts
            )
        return self._cache[key]

    def base_rate(self, job: str, shape: Shape, clock: int) -> Rate:
        """The true rate without round noise."""
        c = self.predicted(job, shape, clock)
        if c is None:
            raise ValueError(f"{job}: {shape} at {clock} MHz cannot run")
        return Rate(c.samples_per_second * self._speed_error[job], c.watts * self._power_error[job])

    def slice_rate(self, job: str, gpu_type: str, profile: str, clock: int) -> Rate:
        """The true rate on one instance of ``profile``, without round noise: the model's
        one-GPU rate within the instance's memory times ``min(1, share / fraction used)``,
        times the job's errors; watts above the GPU's idle power."""
        configs = self._slices.get(job)
        if configs is None:
            mig = self.problem.cluster.mig
            configs = self._slices[job] = instance_configs(self._jobs[job], self._facts, mig)
        c = configs.get((gpu_type, profile, clock))
        if c is None:
            raise ValueError(f"{job}: {profile} on {gpu_type} at {clock} MHz cannot run")
        sps, watts = at_fraction(c, self.problem.cluster.mig[gpu_type], self._fraction[job])
        return Rate(sps * self._speed_error[job], watts * self._power_error[job])

    def round_noise(self) -> tuple[float, float]:
        """Multipliers of throughput and power for one job in one round."""
        s = self.settings.round_sigma
        return (
            mean_one_lognormal(self._round_rng, s),
            mean_one_lognormal(self._round_rng, s),
        )

    def reference_rate(self, sim: SimJob, reference_type: str) -> float:
        """True samples/s of the trace's run: the requested GPUs of the reference type at full
        clock in their best shape; where the job cannot run so, the best type that can."""
        job = self._jobs[sim.name]
        n = sim.trace.num_gpus
        types = [reference_type, *sorted(t for t in self._facts if t != reference_type)]
        for t in types:
            best = self._best_at(job, t, n)
            if best > 0:
                return best
        raise ValueError(f"{sim.name}: cannot run on {n} GPUs of any type")

    def fastest_rate(self, sim: SimJob) -> float:
        """True samples/s of the job's fastest whole-GPU configuration: any type it runs on, any
        GPU count it may take, full clock, no round noise. Alone on the cluster from its
        submission, no policy finishes it sooner than its work at this pace (a JCT floor)."""
        return max(
            (
                self.base_rate(
                    sim.name, shape, self._facts[shape.gpu_type].gpu.max_clock_mhz
                ).samples_per_second
                for shape in self._shapes(sim)
            ),
            default=0.0,
        )

    def least_joules_per_sample(self, sim: SimJob) -> float:
        """True joules per sample of the job's most frugal configuration (``costs``). Its work
        at this cost bounds the energy its GPUs draw while it trains under any policy (an
        energy floor; restarts and waits only add to it)."""
        return min(joules for _, joules in self.costs(sim))

    def costs(self, sim: SimJob) -> list[tuple[float, float]]:
        """(seconds, joules) per sample, true and without round noise (mean one), of every
        configuration the job can run in: any type it runs on, any GPU count it may take, any
        clock, one MIG instance where it may take one. A run that splits its samples among
        configurations spends, per sample, a convex combination of these."""
        out = [
            (1.0 / r.samples_per_second, r.watts / r.samples_per_second)
            for shape in self._shapes(sim)
            for clock in self._facts[shape.gpu_type].gpu.sm_clocks_mhz
            if self.predicted(sim.name, shape, clock) is not None
            and (r := self.base_rate(sim.name, shape, clock)).samples_per_second > 0
        ]
        if sim.slices and self.problem.cluster.mig:
            job = self._jobs[sim.name]
            for gpu_type, profile, clock in instance_configs(
                job, self._facts, self.problem.cluster.mig
            ):
                r = self.slice_rate(sim.name, gpu_type, profile, clock)
                if r.samples_per_second > 0:
                    out.append((1.0 / r.samples_per_second, r.watts / r.samples_per_second))
        if not out:
            raise ValueError(f"{sim.name}: no configuration it can run in")
        return out

    def _shapes(self, sim: SimJob) -> list[Shape]:
        """The whole-GPU shapes the job can run in (at full clock): every type it may use,
        every GPU count it may take, every tensor and pipeline split."""
        job = self._jobs[sim.name]
        return [
            shape
            for t in sorted(self._facts)
            if not (job.allowed_gpu_types and t not in job.allowed_gpu_types)
            for n in range(sim.min_gpus, sim.max_gpus + 1)
            for shape in self._splits(t, n)
            if self.predicted(job.name, shape, self._facts[t].gpu.max_clock_mhz) is not None
        ]

    @staticmethod
    def _splits(gpu_type: str, n: int) -> list[Shape]:
        """`n` GPUs of the type as data x tensor (at most 8) x pipeline (1-8) degrees."""
        out: list[Shape] = []
        tp = 1
        while tp <= min(n, 8):
            if n % tp == 0:
                out.extend(
                    Shape(gpu_type, n // tp // pp, tp, pp)
                    for pp in (1, 2, 4, 8)
                    if not (n // tp) % pp
                )
            tp *= 2
        return out

    def _best_at(self, job: Job, gpu_type: str, n: int) -> float:
        facts = self._facts.get(gpu_type)
        if facts is None or (job.allowed_gpu_types and gpu_type not in job.allowed_gpu_types):
            return 0.0
        top = facts.gpu.max_clock_mhz
        best = 0.0
        for shape in self._splits(gpu_type, n):
            if self.predicted(job.name, shape, top) is not None:
                best = max(best, self.base_rate(job.name, shape, top).samples_per_second)
        return best


def samples_to_train(duration_s: float, reference_samples_per_second: float) -> float:
    """A trace job's work: its duration at the reference pace."""
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise ValueError(f"duration must be positive, got {duration_s}")
    return duration_s * reference_samples_per_second
