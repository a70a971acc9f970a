"""Every timing and size knob of the solver, with where its default comes from.

One typed object (``SolverSettings``) instead of module constants: the service, the CLI, the
batch and sweep tools and the simulator build a ``Solver`` from it, and tests hand a solver
other settings instead of patching modules. Defaults are measurements on the project's 2-core
machine (``docs/benchmarks.md``) or design choices, each said so below.

Loading (``load_settings``): the built-in defaults, then the ``[tuning]`` table of an operator
profile (``solver.app.profile``), then ``DSFRO_TUNING_<NAME>`` environment variables, which win.
A bad value names the key or the variable it came from.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from solver.perfmodel.guard_params import GuardParams

ENV_PREFIX = "DSFRO_TUNING_"
TABLE = "tuning"
RESERVE_FLOOR_SECONDS = 0.03
RESERVE_SECONDS_PER_JOB = 2e-4
"""What a reserve for finishing after a step keeps below its full size, by the snapshot's jobs
(``solver.core.deadline.reserve_by_size``): materializing and checking a plan took 0.5 ms at 32
jobs, 3.2 ms at 256 and 36 ms at 2,048 (small, medium, large, 2026-12-07), and 5 ms at 1,000
jobs half on MIG slices; the floor is for a solver's stop and a loaded machine."""
"""The profile table that holds these settings."""


class SolverSettings(BaseSettings):
    """Timing and size knobs of the solver; immutable, picklable (sent to worker processes)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        frozen=True,
        extra="forbid",
        validate_default=True,
        use_attribute_docstrings=True,
    )

    # ------------------------------------------------------------ the first plan
    first_plan_seconds: float = Field(0.003, gt=0.0)
    """Fixed part of the time the normal path takes to its first answer (enumeration, the
    heuristic's set-up, its first greedy pass, the plan, the checker). With less time left the
    quick plan answers instead."""
    first_plan_seconds_per_job: float = Field(2e-4, gt=0.0)
    """Per job: measured 137 us a job at medium, 113 at large and 159 at xl on the 2-core
    machine at a 1-minute load of 3-5 (scripts/bench_deadline.py --profile), with half again
    for load."""
    decomposed_first_plan_seconds_per_job: float = Field(2.5e-4, gt=0.0)
    """The same for a decomposed solve, on an idle machine (scaled by the call's pace): the
    parts' first round with the quick plan before it answered xl (16,384 jobs) in 2.75 s and
    20,000 jobs in 4.0 s on the 2-core machine (1.7-2.0e-4 s a job, 2026-12-07). It was 6e-4,
    measured at a load of 8 before the quick plan existed: xl and 20,000 jobs then answered
    budgets of 5-10 s with the quick plan at 1.3-2 s, 12-14 % below the parts' plans."""
    after_enumeration_share: float = Field(0.7, gt=0.0, le=1.0)
    """Share of the first plan's estimate still needed once configurations are enumerated
    (measured 0.19 s at large, 93 us a job, against 0.29 s kept): a machine slower than
    estimated gets the quick plan then."""
    finish_seconds: float = Field(0.002, gt=0.0)
    """Fixed part of the time kept back to turn choices into a checked plan."""
    finish_seconds_per_job: float = Field(5e-5, gt=0.0)
    """Per job: measured 16 us at large and 40 us at xl (plan and score, checker), 2-3 us for
    the protobuf, on the 2-core machine at a load of 3-5."""
    quick_chunk_jobs: int = Field(256, ge=1)
    """Jobs the quick plan enumerates and places between two looks at the clock (10-20 ms at
    1,000 nodes on the 2-core machine)."""
    quick_check_every: int = Field(32, ge=1)
    """Placements of the quick plan between two looks at the clock."""

    # ------------------------------------------------------------ the search
    heuristic_share: float = Field(0.5, gt=0.0, le=1.0)
    """Safety stop of the heuristic's passes, as a share of the budget: their work is limited
    by passes, so their plan does not depend on the machine's speed; this stop binds only on an
    overloaded machine."""
    ruin_stall_attempts: int = Field(400, ge=0)
    """Ruin-and-recreate attempts in a row that do not beat the best state met, after which it
    stops (solver.search.ruin): a work limit, so its plan does not depend on the machine's
    speed. 400: on the hetero-power instances of 32 and 64 nodes, 150 left one 0.4 % below the
    optimum that 400 brought to 0.003 % (docs/benchmarks.md); 0 turns it off."""
    max_guided_seconds: float = Field(2.0, gt=0.0)
    """Safety stop of one guided placement (an aggregated choice placed, then local search) at
    short budgets; with more time left, ``guided_share`` of it."""
    guided_share: float = Field(0.6, gt=0.0, le=1.0)
    """Safety stop of one guided placement as a share of the time left, when above
    ``max_guided_seconds``: a fixed 2 s cut the placement in the racks of the aggregated
    split at 1,024 nodes / 1,600 jobs whenever the first placement ran 10 % slow (0.3 % of
    the objective, docs/benchmarks.md)."""
    guided_start_share: float = Field(0.3, gt=0.0)
    """The aggregated LP's guide is placed with this share of the placement's estimate left
    (it stops at its window, the jobs placed by then kept): the largest groups go first, and
    at 1,024 nodes / 1,600 jobs a placement cut at 20 % of its time was worth 2,865, at 35 %
    3,161, whole 3,166, against the first plan's 2,646 (docs/benchmarks.md). With its estimate
    and half again required, a call whose first pass ran 2-4 times slow under load skipped it
    and answered 14-17 % below the LP's bound."""
    extract_seconds: float = Field(0.15, ge=0.0)
    """Kept back after an exact solver stops, to extract, check and return its plan, from 600
    jobs up; less for fewer (``solver.core.deadline.extract_seconds``)."""
    extract_floor_seconds: float = Field(RESERVE_FLOOR_SECONDS, ge=0.0)
    """The extraction reserve's fixed part below 600 jobs (``RESERVE_FLOOR_SECONDS``): for an
    exact solver's stop and a loaded machine. At 0.15 s whatever the size, a 2-job snapshot at
    a 0.3 s budget had no time for the aggregated LP and answered FALLBACK (bench_unseen
    --seed 59, case 32)."""
    extract_seconds_per_job: float = Field(RESERVE_SECONDS_PER_JOB, ge=0.0)
    """The extraction reserve per job below 600 jobs (``RESERVE_SECONDS_PER_JOB``): with the
    floor, at least 4 times what materializing and checking a plan takes."""
    aggregate_seconds_per_column: float = Field(1e-5, gt=0.0)
    """Rough cost of the aggregated LP, built and solved, per column (a configuration, and per
    power class the split over each budgeted rack: ``solver.search.bound.aggregate_columns``):
    0.27 s for large's 37,000 configurations without rack budgets, 0.23 s for 19,000 columns
    at 1,024 nodes in 26 budgeted racks (and 2.1-3.6 s for 360,000 when the split was per
    configuration). With less time left the heuristic's plan answers."""
    aggregate_fairness_factor: float = Field(2.0, ge=1.0)
    """How much longer the aggregated LP takes with a fairness term that couples the jobs'
    columns (``couples_columns``): at 2,048 jobs 0.41-0.59 s against 0.21-0.26 s without
    (max-min by job or tenant, finish time, proportional by tenant), at 1,024 jobs 1.2-1.6
    times (docs/benchmarks.md, "Fairness modes per round")."""
    dual_first_share: float = Field(0.25, gt=0.0, le=1.0)
    """Most of the time left the Lagrangian dual may take before the priced passes when the LP
    is judged slow (``dual_first``): its ten cuts took 61 ms at 2,048 jobs; capped at a tenth
    of the 0.6 s left there, it stopped after one, and the gap reported was 1.83 %, not 0.54 %."""
    lp_max_configurations: int = Field(50_000, ge=1)
    """Above this, the aggregated bound comes from its Lagrangian dual: GLOP took ~11 s on
    250,000 configurations, the cutting planes under a second."""
    aggregate_mip_share: float = Field(0.5, gt=0.0, le=1.0)
    """Share of the time left for the aggregated MIP (beside LNS, or before it on one core)."""
    min_aggregate_mip_seconds: float = Field(0.1, gt=0.0)
    """The aggregated MIP is not started with less than this."""
    mip_integral_racks: bool = True
    """Where racks have power budgets, the aggregated MIP's second phase counts each power
    class's GPUs per budgeted rack in whole tensor groups, as every placed plan has them
    (``solver.core.steps.bound.run_mip``; false: racks split freely throughout). On the
    power-capped snapshots of 32-1,024 nodes at 1-10 s the gap told fell by about half (3.9
    against 6.3 points over 32 rows) and the plans were better on balance (up to 0.21 points
    better, up to 0.1 worse on two snapshots at 1-5 s): docs/benchmarks.md, "The aggregated
    MIP in whole tensor groups per rack"."""
    lns_share_one_core: float = Field(0.5, gt=0.0, le=1.0)
    """On one core, the share of the time left that LNS gets before the full model runs."""

    # ------------------------------------------------------------ the full model
    build_seconds_per_variable: float = Field(2e-6, gt=0.0)
    """Rough cost of building the full model, its warm start and loading it into a solver:
    0.6-0.8 us per variable on a quiet machine, 1.3-2 us on a loaded one (docs/benchmarks.md,
    "Building the full model")."""
    cpsat_build_seconds_per_variable: float = Field(1.2e-5, gt=0.0)
    """The same on CP-SAT, whose model is built row by row in Python: 6.2-7.7 us per estimated
    variable from 2,000 to 159,000 on a quiet machine, 11.5 beside another solve (2026-12-05);
    sized at 2e-6 before, a 1 s call at 200 nodes / 400 jobs answered after 2.4 s."""
    pyomo_build_seconds_per_variable: float = Field(1.2e-4, gt=0.0)
    """The same through Pyomo, whose model is Python objects handed to the solver one row at a
    time: 72-116 us per variable from 481 to 26,673 variables on a quiet machine (its
    ``to_pyomo`` and appsi's ``set_instance``, 2026-12-05). Neither is bounded by the solver's
    time limit: at 25,006 variables a 1 s call answered after 3.4 s."""
    full_model_max_variables: int = Field(200_000, ge=0)
    """AUTO solves the full model up to about this many variables (0.2-0.4 s to build and
    load); beyond, HiGHS's presolve alone outlasts most budgets."""
    in_process_max_variables: int = Field(20_000, ge=0)
    """Up to this size the full model is solved in the solve's own process (presolve takes
    milliseconds); beyond, in an isolated worker killed at the deadline."""
    auto_exact_backend: Literal["HIGHS", "CPSAT"] = "HIGHS"
    """The full model's backend under AUTO: HiGHS proved pai optimal in 12 s and closed
    modern-power to 0.2 % where CP-SAT stayed at 4.9 % and 7.0 % (docs/backends.md)."""
    isolated_time_share: float = Field(0.85, gt=0.0, le=1.0)
    """An isolated full model's own time limit, as a share of the time to its deadline: it
    stops and answers before it would be killed (HiGHS overruns by a few per cent)."""
    isolated_mip_max_configurations: int = Field(0, ge=0)
    """Up to this many configurations the exact side's aggregated MIP runs in a kept worker
    process when one is idle (``solver.search.bound_worker``): beside the search its Python
    callbacks wait for the GIL and it ran 2.5-3x slower than alone (hetero-power-32-s2:
    1.07-1.59 s against 0.35-0.40 s); 8,000 proved 32-s2 and 64-s2 at 1 s on an idle machine.
    Sending it the snapshot took 0.04 s at 3,883 configurations and 0.18 s at 12,677, where its
    callbacks are rare (8 a second). 0 (the default: never): under 32 clients on the service it
    showed no gain (the service's solves side by side get one core each, where the MIP runs in
    process between the search's passes; docs/reliability.md, "Rerun 2026-12-06")."""
    kept_exact_workers: int = Field(4, ge=0)
    """Isolated full-model workers kept idle between solves."""

    mig_seconds_per_slice_job: float = Field(2.5e-3, ge=0.0)
    """Kept back from the whole-GPU paths of a snapshot with MIG, per slice job (beside the
    0.2 s margin for the answer), to pack the slices, finish the consolidated variant and bound
    the snapshot with them (solver.core.mig): for 500 slice jobs beside 500 others on 1,024
    GPUs on the 2-core machine, 0.29 s packing, 0.36 s for the consolidated variant's packing
    and check, 0.53 s for the slice LP (2026-12-05; with 1.5e-3, sized before the consolidated
    variant, the LP was stopped and no bound answered). At most half the time left."""

    carbon_deadline_margin: float = Field(0.25, ge=0.0)
    """A job with a deadline waits for cleaner electricity only while its predicted run, this
    share longer, still ends by the deadline (solver.core.carbon). Design choice: the
    performance model's median errors on measured runs are 15-40 % (docs/calibration.md)."""

    power_states_seconds_per_job: float = Field(2e-4, ge=0.0)
    """Kept back from the solve of a snapshot with power saving or suspended nodes, per job
    (beside 0.2 s), to wake nodes for queued jobs, suspend idle ones and bound the snapshot
    over every node (solver.core.power_states): the configurations once more (45-70 us a job at
    1,000 jobs) and the aggregated LP (0.1 s at 1,000 jobs on 1,024 GPUs). At most a quarter
    of the time left."""

    # ------------------------------------------------------------ decomposition
    decompose_min_jobs: int = Field(8_192, ge=1)
    """AUTO decomposes snapshots with this many jobs ..."""
    decompose_min_nodes: int = Field(4_096, ge=1)
    """... or this many nodes."""
    part_gpus: int = Field(8_192, ge=8)
    """Target GPUs per part (at least one part per worker): a part is then about as large as
    the large instance. On xl (65,536 GPUs, 2 workers), 8 parts of 8,192 GPUs gave the first
    plan in 2.4-2.7 s and a gap of 0.009 % at 20 s, against 3.2-3.7 s and 0.059 % for 32
    parts of 2,048 (docs/benchmarks.md, "Decomposition")."""
    merge_seconds_per_job: float = Field(2.5e-4, gt=0.0)
    """Time kept for merging, bounding, completing and checking a decomposed plan: measured
    3.6 s at xl's 16,384 jobs on the 2-core machine (materialize 0.6, check 0.9 and 0.4,
    Lagrangian bound 1.0, completion 0.7)."""

    # ------------------------------------------------------------ answering (the Deadline)
    read_seconds: float = Field(0.005, ge=0.0)
    """Fixed part of the time to decode, validate and convert a request on an idle machine."""
    read_seconds_per_job: float = Field(8e-5, ge=0.0)
    """Per job: 2026-12-05, idle, in process (best of four reads): 20 ms for medium's 256 jobs,
    164 ms for large's 2,048, 96 ms for a 1,024-node snapshot's 1,600 (0.13-0.21 s in a service
    worker). It was 4.5e-5 (22 ms and 92 ms when measured, before the checks of queues, slices
    and grid forecasts): that read an idle machine as 1.7-2.7 times slow at 1,024 nodes."""
    read_seconds_per_profile_point: float = Field(2.5e-6, ge=0.0)
    """Per measured profile point beyond the job's own share: 2.9 us a point on the 2-core
    machine, idle, without the garbage collector's scans (scripts/bench_read.py, 2,000 jobs x
    250 points: 1.6 s to validate, convert and enumerate), kept a little below so that a request
    a slightly faster machine reads in its budget is not refused for it."""
    read_seconds_per_node_name: float = Field(1e-7, ge=0.0)
    """Per node named in a job's ``excluded_nodes``: 0.12 us where many jobs share a list (2,000
    jobs under four lists of 5,000 of 20,000 nodes) to 0.33 us where every job has its own
    (1,600 jobs, each its own half of 1,024 nodes), the 2-core machine, idle; kept below both."""
    respond_seconds: float = Field(0.005, ge=0.0)
    """Fixed part of the time to turn the plan into the response and send it."""
    respond_seconds_per_job: float = Field(1e-5, ge=0.0)
    """Per job: measured 10 ms for large's 2,048 jobs (result_to_proto and serialising), kept
    twice over."""
    min_read_seconds_to_gauge: float = Field(0.01, gt=0.0)
    """Requests read faster than this say too little about the machine's pace: slowdown 1."""
    max_slowdown: float = Field(4.0, ge=1.0)
    """Largest slowdown gauged from reading a request (the reserves stretch by it)."""
    kill_grace_seconds: float = Field(0.05, ge=0.0)
    """A solve worker still working this long after the instant its answer was due
    (``Deadline.answer_by``: the solver's end and the time to build the answer) is killed, and
    its first plan answers (a FALLBACK): an answer a little late beats none."""
    rpc_deadline_margin_seconds: float = Field(0.2, ge=0.0)
    """Time kept back from a caller's RPC deadline to send the answer; cut to a tenth of a
    short deadline, never below the time to send this answer."""

    threads: int = Field(0, ge=0, le=256)
    """Solver threads when the request sets none; 0: the cores this process may use."""

    # ------------------------------------------------------------ the power margin
    # docs/objective.md, "Power margin"; solver.perfmodel.guard.GuardParams has the same defaults.
    power_margin_z: float = Field(2.5, ge=0.0, le=10.0)
    """Standard deviations of the planned draw kept below the cluster budget: expected draw +
    z * sqrt(sum of per-job variances) <= budget (2.5: a one-sided normal tail of 0.6 %; a design
    choice, measured against the simulator's truth in docs/evaluation.md); 0: off."""
    power_model_uncertainty: float = Field(0.15, ge=0.0, le=2.0)
    """Relative standard deviation of a model-only power prediction: the simulator truth's
    per-job error (solver/simulate/truth.py); the clock model's worst power error on the Zeus
    sweeps is 18.2 % (docs/calibration.md)."""
    power_measured_uncertainty: float = Field(0.05, ge=0.0, le=2.0)
    """... of a measured profile's watts (twice the clock model's 2.5 % median error on the
    Zeus sweeps, for run-to-run variation; an assumption)."""
    power_observed_uncertainty: float = Field(0.03, ge=0.0, le=2.0)
    """... of a job whose current allocation carries its observed watts (the mean over an
    interval repeats within a few percent; an assumption above the simulator's 2 % round noise)."""
    power_limit_z: float = Field(2.0, ge=0.0, le=10.0)
    """A job's per-GPU power limit sits this many of its standard deviations above its mean."""
    power_margin_solves: int = Field(3, ge=1, le=10)
    """Solves at most per request while the plan breaks the margin (each with the budget
    tightened by the excess); then jobs are queued until it holds."""
    power_margin_first_share: float = Field(0.7, gt=0.0, le=1.0)
    """Share of the time left the first solve gets when more may follow."""
    power_margin_probe_share: float = Field(0.3, gt=0.0, le=1.0)
    """When the first solve's first plan already breaks the margin, the share of the time then
    left that the first solve keeps (its bound on the request's budget, a plan there); the
    re-solve under the budget less that plan's margin gets the rest. At 70 % of the time the
    first solve had left a 1 s re-solve 0.16 s, no time for its LP: FALLBACK 3-6 % below
    (64-256 power-capped nodes; docs/benchmarks.md, "Rerun 2026-12-06, evening: the power
    margin's probe")."""
    power_margin_resolve_spare: float = Field(0.05, ge=0.0, le=1.0)
    """After a probe that cut the first solve short, the re-solve's budget is the request's
    less the margin of the plan it was cut at and this share of it again (a first solve that
    ended by itself, its plan as good as it gets there, leaves it less the excess alone, as
    before): the re-solve packs other jobs, whose margin may be larger (64 nodes: 988 W
    against the probe's 958 W), and a plan that breaks the margin keeps it only by lowering
    every limit (counted up to 6 % less, ``CAP_DISCOUNT``)."""
    power_margin_resolve_factor: float = Field(2.0, ge=1.0, le=100.0)
    """A re-solve under a tightened budget runs only with this many times the first solve's
    time to its first plan left (its own first plan, and as long again to improve it): cut
    shorter, it ends on a partial greedy pass, worth less than the first plan with its limits
    lowered (at 1,024 nodes and 5 s, 16 % below; docs/benchmarks.md). It also needs the time
    the first solve took to a plan worth the best settled one (``solve_within_margin``)."""
    power_margin_resolve_seconds_per_job: float = Field(1.7e-3, ge=0.0)
    """Per job, what a re-solve for the margin needs (the first solve's time to a plan worth its
    best settled one) before this solver has measured its own: 1.5-1.8 ms a job at 64 nodes /
    ~100 jobs and at 1,024 nodes / 1,600 jobs on the 2-core machine, idle (2.0-2.5 ms with both
    cores busy beside it); so a first call sizes its first solve as the calls after it do."""

    def guard_params(self) -> GuardParams:
        """The margin and limit parameters as the perfmodel takes them."""
        return GuardParams(
            z=self.power_margin_z,
            model_uncertainty=self.power_model_uncertainty,
            measured_uncertainty=self.power_measured_uncertainty,
            observed_uncertainty=self.power_observed_uncertainty,
            limit_z=self.power_limit_z,
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Plain construction reads only its arguments (tests and code are hermetic);
        # load_settings adds the environment over a profile's table.
        return (init_settings,)


def settings_digest(settings: SolverSettings) -> str:
    """A digest of every setting's value: what a kept result (a batch's line, a sweep's point)
    was solved under."""
    text = json.dumps(settings.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class SettingsError(ValueError):
    """Bad solver settings; ``problems`` has one line per problem, naming its key or variable."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def load_settings(
    table: Mapping[str, Any] | None = None,
    *,
    source: str = "profile",
    environ: Mapping[str, str] | None = None,
) -> SolverSettings:
    """The defaults, then `table` (a profile's [tuning] table, from `source`), then the
    DSFRO_TUNING_* variables of `environ` (default: this process's). SettingsError names every
    bad key or variable."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = dict(table or {})
    where = {k: f"{source}: [{TABLE}] {k}" for k in values}
    fields = SolverSettings.model_fields
    problems = []
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key not in fields:
            problems.append(f"{name}: no such setting (see docs/operations.md, Tuning)")
            continue
        values[key] = raw
        where[key] = name
    try:
        settings = SolverSettings(**values)
    except ValidationError as e:
        for error in e.errors():
            key = str(error["loc"][0]) if error["loc"] else ""
            origin = where.get(key, key)
            if error["type"] == "extra_forbidden":
                problems.append(f"{origin}: no such setting")
            else:
                problems.append(f"{origin}: {error['msg']} (got {error.get('input')!r})")
    if problems:
        raise SettingsError(problems)
    return settings


def describe() -> list[tuple[str, str, str]]:
    """(name, default, what) of every setting, for docs/operations.md and ``--help`` texts."""
    out = []
    for name, field in SolverSettings.model_fields.items():
        out.append((name, repr(field.default), (field.description or "").strip()))
    return out


__all__ = ["ENV_PREFIX", "TABLE", "SettingsError", "SolverSettings", "describe", "load_settings"]
