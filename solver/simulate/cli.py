"""``dsfro simulate``: run a policy over a trace, or compare several policies and seeds.

One run writes ``<out>/<scenario>-<policy>-s<seed>-{summary.json,jobs.csv,rounds.csv,
power.csv}`` and prints its headline metrics. ``--compare`` runs every (policy, seed) on the
executor (local processes, or Ray with ``--ray-address``), writes each run's files, then the
comparison table and figures, every run's energy also at the comparison's equal horizon (its
summary file is rewritten with it). Bad input (a trace, cluster or schedule file) is exit 2 with
one line per problem naming file, row and column; nothing is written then.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from solver import extras
from solver.app.arguments import add_profile_option, csv_arg, duration_arg, int_arg, seed_arg
from solver.app.profile import solver_settings
from solver.client.connection import TOKEN_ENV, add_connection_arguments
from solver.core.settings import SettingsError, SolverSettings
from solver.core.solver import Solver
from solver.runtime.cores import available_cores
from solver.runtime.executors import make_executor
from solver.runtime.memory import TooManyWorkers
from solver.runtime.pools import OFFLINE_RETRIES, Executor, WorkerLost
from solver.runtime.ray import RayConnectionError
from solver.simulate.cli_inputs import connection_of, inputs_problem, settings_overrides
from solver.simulate.core import SimulationError, SimulationLog
from solver.simulate.front import SWEPT, energy_weight_arg, energy_weight_of, variant_label
from solver.simulate.grid_cli import TWEAKS, add_grid, with_tweaks
from solver.simulate.journal import load_run, save_run
from solver.simulate.metrics import Summary, summarize
from solver.simulate.policies import POLICY_NAMES, make_policy
from solver.simulate.power_saving_cli import add_power_saving
from solver.simulate.run_spec import RunSpec
from solver.simulate.summary_text import format_summary

DEFAULT_COMPARE = ("fifo", "las", "gavel", "sia", "zeus", "dsfro")
BASELINES = ("gavel", "fifo")
"""The comparison table gives DSFRO's ratios to these (the issue's targets)."""


def _policy_arg(text: str) -> str:
    if text not in POLICY_NAMES:
        raise argparse.ArgumentTypeError(
            f"unknown policy {text!r}; one of {', '.join(POLICY_NAMES)}"
        )
    return text


def add_arguments(p: argparse.ArgumentParser) -> None:
    from solver.simulate.scenarios import DEFAULT_SCENARIOS

    where = p.add_argument_group("what to simulate (a default scenario, or files)")
    where.add_argument("--scenario", choices=sorted(DEFAULT_SCENARIOS), help="a default scenario")
    where.add_argument("--trace", metavar="CSV", help="trace file (docs/simulation.md)")
    where.add_argument("--cluster", metavar="JSON", help="ClusterSnapshot or instance file")
    where.add_argument("--power-schedule", metavar="JSON", help="cluster budget over time")
    how = p.add_argument_group("how")
    how.add_argument(
        "--policy", type=_policy_arg, default="dsfro", help="one of " + ", ".join(POLICY_NAMES)
    )
    how.add_argument("--seed", type=seed_arg, default=1, help="truth, failures and solver seed")
    how.add_argument(
        "--budget", type=duration_arg, metavar="DURATION", help="policy time per round"
    )
    how.add_argument(
        "--interval", type=duration_arg, metavar="DURATION", help="round interval (300s)"
    )
    how.add_argument(
        "--max-time", type=duration_arg, metavar="DURATION", help="stop the clock here"
    )
    how.add_argument(
        "--energy-horizon",
        type=duration_arg,
        metavar="DURATION",
        help="report energy also at this horizon after the first submission, idle power added "
        "after the run (default: the run's own span; --compare: the longest run's)",
    )
    how.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="DSFRO policies call this service (with the TLS flags and a bearer token from "
        f"--token-file or {TOKEN_ENV}, as dsfro solve --server)",
    )
    add_connection_arguments(how, token=True)
    how.add_argument(
        "--power-headroom",
        type=float,
        default=None,
        help="share of the power budget kept back for prediction error, for every policy "
        "(default: the scenario's)",
    )
    how.add_argument(
        "--power-guard",
        choices=("on", "off"),
        default="on",
        help="on (default): every policy's plan held to the power margin and its jobs to "
        "power limits (solver/simulate/guard.py); off: the budget less --power-headroom alone",
    )
    how.add_argument(
        "--no-restart-cost",
        action="store_true",
        help="jobs (re)start without delay, as in Gavel's simulator (default: checkpoint "
        "save and load by model size, for every policy)",
    )
    how.add_argument(
        "--feedback",
        action="store_true",
        help="send jobs that have run as profiles calibrated by what they showed (all policies)",
    )
    add_power_saving(p)
    add_grid(p)
    add_profile_option(p)
    comp = p.add_argument_group("comparison")
    comp.add_argument("--compare", action="store_true", help="run several policies and seeds")
    comp.add_argument(
        "--policies",
        type=csv_arg(_policy_arg),
        help="for --compare (default: " + ",".join(DEFAULT_COMPARE) + ")",
    )
    comp.add_argument("--seeds", type=csv_arg(seed_arg), help="for --compare (default 1,2,3)")
    comp.add_argument("--workers", type=int_arg(1, 1024), help="parallel runs (default: cores)")
    comp.add_argument(
        "--energy-weights",
        type=csv_arg(energy_weight_arg),
        metavar="LIST",
        help="for --compare: dsfro also at each of these energy weights (e.g. 0.3,1,3,10), and "
        "the JCT-energy front figure",
    )
    comp.add_argument("--ray-address", metavar="ADDRESS", help="run the comparison on Ray")
    p.add_argument("--out", metavar="DIR", default="simulation", help="output folder (simulation/)")
    comp.add_argument(
        "--resume", action="store_true", help="keep the runs of --compare in DIR/.runs/ that "
        "finished before (same inputs and settings), run the others",
    )  # fmt: skip


def command(args: argparse.Namespace) -> int:
    if problem := inputs_problem(args):
        print(f"dsfro simulate: {problem}", file=sys.stderr)
        return 2
    if args.compare and (problem := extras.missing("plot", "dsfro simulate --compare's figures")):
        print(f"dsfro simulate: error: {problem}", file=sys.stderr)
        return 2
    overrides = settings_overrides(args)
    if isinstance(overrides, str):
        print(f"dsfro simulate: {overrides}", file=sys.stderr)
        return 2
    try:  # DSFRO's own margin loop off: the simulator holds every policy to the same rule
        args.settings = solver_settings(args.profile).model_copy(update={"power_margin_z": 0.0})
    except SettingsError as e:
        print(f"dsfro simulate: error: {e}", file=sys.stderr)
        return 2
    try:
        scenario_name = _preflight(_spec(args, args.policy, args.seed, overrides))
    except SimulationError as e:  # every problem of the inputs, before anything is written
        for line in e.problems:
            print(line, file=sys.stderr)
        return 2
    policies = args.policies or (DEFAULT_COMPARE if args.compare else [args.policy])
    seeds = args.seeds or ([1, 2, 3] if args.compare else [args.seed])
    specs = [_spec(args, p, s, overrides) for p in policies for s in seeds]
    if args.energy_weights and not (args.compare and SWEPT in policies):
        print("dsfro simulate: --energy-weights needs --compare with dsfro", file=sys.stderr)
        return 2
    specs += with_energy_weights(specs, args.energy_weights or [])
    try:
        if not args.compare:
            summary, log = run_one(specs[0])
            print(format_summary(summary))
            if log.stopped:  # the policy left jobs waiting for good: its files are written
                print(f"dsfro simulate: {log.stopped}", file=sys.stderr)
                return 1
            return 0
        return _compare(specs, scenario_name, args)
    except SimulationError as e:  # a policy broke the rules during the run
        for line in e.problems:
            print(f"dsfro simulate: {line}", file=sys.stderr)
        return 1


def with_energy_weights(specs: Sequence[RunSpec], weights: Sequence[float]) -> list[RunSpec]:
    """DSFRO's runs again at each energy weight (one it already has is not repeated)."""
    out = []
    for spec in specs:
        if spec.policy != SWEPT:
            continue
        for w in sorted(set(weights) - {energy_weight_of(spec.overrides)}):
            weights_now = {**(spec.overrides.get("weights") or {}), "energy": w}
            overrides = {**spec.overrides, "weights": weights_now}
            out.append(replace(spec, overrides=overrides, label=variant_label(spec.policy, w)))
    return out


def _spec(args: argparse.Namespace, policy: str, seed: int, overrides: dict[str, Any]) -> RunSpec:
    return RunSpec(
        args.scenario,
        args.trace,
        args.cluster,
        args.power_schedule,
        policy,
        seed,
        args.out,
        overrides,
        args.server,
        getattr(args, "settings", None) or SolverSettings(),
        (args.profile.fairness.mean_weight or 0.0) if args.profile is not None else 0.0,
        args.energy_horizon or 0.0,
        connection=connection_of(args),
    )


def _load(spec: RunSpec) -> Any:
    from solver.simulate.scenario import load_scenario
    from solver.simulate.scenarios import DEFAULT_SCENARIOS

    if spec.scenario is not None:
        scenario = DEFAULT_SCENARIOS[spec.scenario](spec.seed)
    else:
        assert spec.trace is not None and spec.cluster is not None
        scenario = load_scenario(spec.trace, spec.cluster, spec.power)
    if overrides := {k: v for k, v in spec.overrides.items() if k != TWEAKS}:
        scenario = replace(scenario, settings=replace(scenario.settings, **overrides))
    settings = with_tweaks(scenario.settings, spec.overrides.get(TWEAKS))
    return replace(scenario, settings=settings)


def _preflight(spec: RunSpec) -> str:
    """The scenario's name once its inputs pass every check, those that need the settings
    (the budgets less the headroom) and the jobs' configurations (each fits some budget)
    included; SimulationError naming the field or the trace row otherwise."""
    from solver.simulate.preflight import budget_problems, scenario_problem, unrunnable_problems

    scenario = _load(spec)
    names = {
        "schedule_name": spec.power or f"{scenario.name} power schedule",
        "cluster_name": spec.cluster or f"{scenario.name} cluster",
    }
    headroom = scenario.settings.power_headroom
    base = scenario.settings.power_saving.node_base_watts
    problems = budget_problems(
        scenario.cluster, scenario.power, headroom, node_base_watts=base, **names
    )
    if not problems:
        jobs = scenario.sim_jobs()
        problem = scenario_problem(scenario.cluster, jobs, scenario.settings)
        trace = spec.trace or scenario.name
        problems = unrunnable_problems(
            problem,
            scenario.cluster,
            jobs,
            scenario.power,
            headroom,
            lambda j: f"{trace}:{j.trace.row}",
            node_base_watts=base,
            **names,
        )
    if problems:
        raise SimulationError(problems)
    return str(scenario.name)


def run_one(spec: RunSpec) -> tuple[Summary, SimulationLog]:
    """Simulate one (scenario, policy, seed) and write its files (top level: runs in workers)."""
    from solver.simulate.engine import Simulation
    from solver.simulate.outputs import write_run

    scenario = _load(spec)
    solver = Solver(spec.settings)
    try:
        policy = make_policy(
            spec.policy,
            server=spec.server,
            connection=spec.connection,
            solver=solver,
            fairness_mean_weight=spec.fairness_mean_weight,
        )
        log = Simulation(
            scenario.cluster,
            scenario.sim_jobs(),
            policy,
            schedule=scenario.power,
            settings=scenario.settings,
            seed=spec.seed,
            scenario=scenario.name,
        ).run()
    finally:
        solver.close()
    if spec.label:
        log = replace(log, policy=spec.label)
    summary = summarize(log, spec.energy_horizon_s)
    write_run(log, summary, Path(spec.out), f"{scenario.name}-{log.policy}-s{spec.seed}")
    save_run(spec, (summary, log))  # for --compare --resume
    return summary, log


def run_or_problems(spec: RunSpec) -> tuple[Summary, SimulationLog] | list[str]:
    """run_one for a worker: a run that stops on a SimulationError (a policy that broke the
    rules, a service that did not answer) gives its problems, one line each."""
    try:
        return run_one(spec)
    except SimulationError as e:
        return e.problems


def _stopped(problems: Sequence[str], code: int = 1) -> int:
    for line in problems:
        print(f"dsfro simulate: {line}", file=sys.stderr)
    print(
        "dsfro simulate: no comparison was written; the runs that finished have their files "
        "and are kept (--compare --resume runs the others)",
        file=sys.stderr,
    )
    return code


def _run_all(
    specs: Sequence[RunSpec], executor: Executor
) -> tuple[list[tuple[Summary, SimulationLog]], list[str]]:
    """Every run, a chunk of the executor's width at a time, and the problems that stopped
    them (none when every run finished)."""
    from tqdm import tqdm

    results: list[tuple[Summary, SimulationLog]] = []
    with tqdm(total=len(specs), desc="simulate", unit="run", file=sys.stderr) as bar:
        step = max(executor.workers, 1)
        for start in range(0, len(specs), step):
            chunk = list(specs[start : start + step])
            try:  # a run is deterministic: a rerun gives what the lost one would have
                done = executor.map(run_or_problems, chunk, retries=OFFLINE_RETRIES)
            except WorkerLost as e:
                lost = chunk[e.task] if e.task is not None else None
                which = f"{lost.label or lost.policy} seed {lost.seed}" if lost else "a run"
                return results, [f"{which} lost its worker {OFFLINE_RETRIES + 1} times ({e})"]
            except RayConnectionError as e:  # the Ray cluster went away
                return results, [str(e)]
            failed = [
                f"{spec.label or spec.policy} seed {spec.seed}: {line}"
                for spec, result in zip(chunk, done, strict=True)
                if isinstance(result, list)
                for line in result
            ]
            if failed:
                return results, failed
            for result in done:
                assert not isinstance(result, list)
                results.append(result)
                bar.set_postfix_str(f"{result[0].policy} seed {result[0].seed}")
                bar.update(1)
    return results, []


def _compare(specs: Sequence[RunSpec], scenario: str, args: argparse.Namespace) -> int:
    from solver.simulate.figures import write_figures
    from solver.simulate.metrics import equal_horizon
    from solver.simulate.outputs import write_comparison, write_summary

    workers = args.workers or (
        1 if args.ray_address is None and len(specs) == 1 else available_cores()
    )
    try:
        executor = make_executor(args.ray_address, workers)
    except RayConnectionError as e:  # the Ray cluster could not be joined
        return _stopped([str(e)])
    except TooManyWorkers as e:
        print(f"dsfro simulate: error: --workers: {e}", file=sys.stderr)
        return 2
    kept = {i: run for i, s in enumerate(specs) if args.resume and (run := load_run(s))}
    if kept:
        print(f"dsfro simulate: {len(kept)} of {len(specs)} runs kept from before", file=sys.stderr)
    try:
        ran, problems = _run_all([s for i, s in enumerate(specs) if i not in kept], executor)
    except KeyboardInterrupt:
        return _stopped(["interrupted"], 130)
    finally:
        executor.close()
    if problems:
        return _stopped(problems)
    fresh = iter(ran)
    results = [kept[i] if i in kept else next(fresh) for i in range(len(specs))]
    out = Path(args.out)
    summaries = equal_horizon([s for s, _ in results], args.energy_horizon or 0.0)
    for summary in summaries:  # each run's summary at the comparison's horizon
        write_summary(summary, out, f"{summary.scenario}-{summary.policy}-s{summary.seed}")
    logs = [log for _, log in results]
    shown = next((g for g in logs if g.policy.startswith("dsfro")), logs[0])
    front = {s.label or s.policy: energy_weight_of(s.overrides) for s in specs if s.policy == SWEPT}
    figures = write_figures(
        logs, out, scenario, summaries, run=shown, front=front if len(front) > 1 else None
    )
    written = write_comparison(summaries, out, f"{scenario}-comparison", BASELINES, figures)
    for path in written:
        print(path)
    return 0


def add_commands(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate", help="run scheduling policies over a trace on a simulated cluster"
    )
    add_arguments(p)
    p.set_defaults(func=command)
