"""Snapshots no test was written for: random generator settings, every backend, short budgets;
what went wrong, in process.

Each case draws a node mix (``hybrid``, ``modern``, ``pai``, ``hetero-power``), a size, the
shares of running, deadline, unavailable and slice jobs, and the cluster and rack power
budgets, then solves it with HEURISTIC, AUTO and one exact backend (CP-SAT, HiGHS, AGGREGATE
or Pyomo), each at a budget of 0.3, 1 or 3 s. A call goes wrong when it raises, its plan fails
the independent checker, it answers past its budget by more than ``--slack``, its objective is
above its proven bound, it says OPTIMAL where its bound does not prove it (the termination
rule's tolerance, 1e-6 of max(|objective|, 1)), or its objective is not what EvaluatePlan
gives its plan; an INFEASIBLE answer is counted apart (a request can contradict itself). A
snapshot the generator refuses (``modern`` with measured profiles, slices on types without MIG)
is drawn again differently.

    .venv/bin/python -m scripts.bench_unseen --seed 1 --cases 70 --jsonl /tmp/unseen.jsonl

With ``--request-features`` each snapshot also gets, from a random stream of its own (the
snapshots stay those of the seed), a fairness mode and scope with a fairness weight, other
objective weights, a relative gap of 0, 1 % or 30 %, and tenant queues (one per tenant, in
one cohort or none, nominal quotas of 10-60 % of each GPU type, some with borrowing and lending
limits), for half of them node exclusions (one to four rules, each barring a random 10-60 %
of the nodes, on a random 20-60 % of the jobs), and for half node labels and taints (zone,
generation, spot; a fifth of the nodes tainted) with selectors on 40 % of the jobs and a
toleration on half, preferred zones on 40 % and a PreferNoSchedule taint on a tenth of the
nodes: what the generator leaves at its defaults.

With ``--server ADDR`` the calls go to a running service as a client that knows only the proto
would send them (``solver.client``), and each answer's plan is checked here, in this process
(``solver.app.evaluate``); an RPC error counts as "raised", with its status code.

With ``--names kubernetes`` or ``--names own`` the GPU types are renamed as sites name them
(``scripts.common.gpu_names``): GPU feature discovery's product names, or names no catalog knows
with each MIG type's geometry on the wire. The snapshots are otherwise those of the seed.

With ``--energy-features`` each snapshot also gets, from a stream of its own, node base power,
a power-saving policy (suspended and long-idle nodes among them), a grid forecast with deferrable
jobs, or an energy budget (``scripts.common.energy_features``). ``--exact`` names the backends
the third call draws from (``decomposed`` among them reaches the parts' path on any size).

The table goes, with the command and date, into docs/reliability.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from scripts.common.energy_features import with_energy_features
from scripts.common.gpu_names import MODES, as_sites_name
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import (
    allocations_from_proto,
    backend_to_proto,
    problem_from_proto,
    result_to_proto,
)
from solver.app.convert_mig import changes_from_proto
from solver.app.convert_power import actions_from_proto, power_limits_from_proto
from solver.app.evaluate import evaluate_plan
from solver.app.limits import Limits
from solver.client import Client, DsfroError
from solver.core.incumbent import proven_optimal
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Backend, Problem
from solver.offline.generate import generate, spec_from_args

LIMITS = Limits(max_time_budget_seconds=600)
MIXES = ("hybrid", "modern", "pai", "hetero-power")
"""Node mixes of ``dsfro generate``; only ``hybrid`` and ``modern`` have MIG geometries."""
EXACT = (Backend.CPSAT, Backend.HIGHS, Backend.AGGREGATE, Backend.PYOMO)
BUDGETS = (0.3, 1.0, 3.0)


def draw(rng: random.Random) -> list[str]:
    """`dsfro generate` arguments of one case."""
    mix = rng.choice(MIXES)
    nodes = rng.choice([4, 16, 64, 200])
    jobs = rng.choice([max(2, nodes // 2), nodes * 2, nodes * 4])
    args = [
        *("--nodes", str(nodes), "--jobs", str(jobs), "--seed", str(rng.randrange(1000))),
        *("--mix", mix, "--running-share", str(rng.choice([0, 0.3, 0.8]))),
        *("--deadline-share", str(rng.choice([0, 0.5]))),
        *("--unavailable-share", str(rng.choice([0, 0.2]))),
        *("--power-budget-fraction", str(rng.choice([0.3, 0.6, 1.0]))),
        *("--rack-power-budget-fraction", str(rng.choice([0.5, 0.8, 1.0]))),
    ]
    slices = rng.choice([0, 0, 0.5]) if mix in ("hybrid", "modern") else 0
    args += ["--slice-share", str(slices)]
    if mix == "modern":  # no measured profile exists for its GPU types
        args += ["--profile-share", "0"]
    return args


def snapshot(
    rng: random.Random,
    features: random.Random | None,
    names: str = "catalog",
    energy: random.Random | None = None,
) -> tuple[list[str], pb.SolveRequest, Problem]:
    """A case the generator makes (one it refuses is drawn again), with `features`' request
    features and `energy`'s energy features when given, its GPU types under `names`
    (``scripts.common.gpu_names``)."""
    while True:
        args = draw(rng)
        try:
            request = generate(spec_from_args(args))
        except ValueError:
            continue
        if features is not None:
            args = [*args, *with_features(request, features)]
        if energy is not None:
            args = [*args, *with_energy_features(request, energy)]
        as_sites_name(request, names)
        return args, request, pipeline.to_problem(request, LIMITS)


FAIRNESS_MODES = ("WEIGHTED_SUM", "MAX_MIN", "PROPORTIONAL", "DRF", "FINISH_TIME")


def with_features(request: pb.SolveRequest, rng: random.Random) -> list[str]:
    """Set random request features on `request`; their description, for the record."""
    mode = rng.choice(FAIRNESS_MODES)
    scope = rng.choice(("JOB", "TENANT"))
    request.fairness.mode = pb.FairnessMode.Value(f"FAIRNESS_MODE_{mode}")  # type: ignore[assignment]
    request.fairness.scope = pb.FairnessScope.Value(f"FAIRNESS_SCOPE_{scope}")  # type: ignore[assignment]
    weights = request.weights
    weights.fairness = rng.choice([0.5, 1.0, 20.0])
    weights.energy = rng.choice([0.0, 0.1, 1.0])
    weights.migration = rng.choice([0.0, 0.05, 1.0])
    weights.locality = rng.choice([0.0, 0.01, 0.5])
    gap = rng.choice([0.0, 0.01, 0.3])
    request.options.relative_gap = gap
    out = [f"fairness={mode}/{scope}", f"gap={gap}"]
    tenants = sorted({j.tenant for j in request.jobs if j.tenant})
    if tenants and rng.random() < 0.6:
        cohort = rng.choice(["", "all"])
        gpus: dict[str, int] = {}
        for n in request.cluster.nodes:
            gpus[n.gpu_type] = gpus.get(n.gpu_type, 0) + n.gpu_count
        # What non-preemptible running jobs hold stays within the quota (else the request
        # contradicts itself, and INFEASIBLE is the right answer, not a finding).
        held: dict[tuple[str, str], int] = {}
        for j in request.jobs:
            if j.HasField("current_allocation") and j.HasField("preemptible") and not j.preemptible:
                key = (j.tenant, j.current_allocation.gpu_type)
                size = sum(len(s.gpu_indices) for s in j.current_allocation.placement)
                held[key] = held.get(key, 0) + (
                    1 if j.current_allocation.HasField("mig_instance") else size
                )
        for name in tenants:
            q = request.cluster.queues.add(name=name, cohort=cohort, weight=rng.choice([1.0, 2.0]))
            for gpu_type, count in sorted(gpus.items()):
                share = round(rng.uniform(0.1, 0.6) * count)
                nominal = max(share, held.get((name, gpu_type), 0))
                quota = q.quotas.add(resource=gpu_type, nominal=nominal)
                if cohort and rng.random() < 0.3:
                    quota.borrowing_limit = round(rng.uniform(0.0, 0.3) * count)
                if cohort and rng.random() < 0.3:
                    quota.lending_limit = round(rng.uniform(0.0, 1.0) * quota.nominal)
        out.append(f"queues={len(tenants)}{'/cohort' if cohort else ''}")
    if rng.random() < 0.5:  # last: the features above stay those of the seed's stream
        names = [n.name for n in request.cluster.nodes]
        rules = [
            rng.sample(names, max(1, round(rng.uniform(0.1, 0.6) * len(names))))
            for _ in range(rng.randint(1, 4))
        ]
        fraction = rng.uniform(0.2, 0.6)
        barred = [j for j in request.jobs if rng.random() < fraction]
        for j in barred:
            j.excluded_nodes.extend(sorted(rng.choice(rules)))
        out.append(f"excluded={len(rules)}x{len(barred)}")
    if rng.random() < 0.5:  # after the exclusions: the seeds before drew the same up to here
        out.append(_node_rules(request, rng))
    return out


def _node_rules(request: pb.SolveRequest, rng: random.Random) -> str:
    """Labels (zone, gen, spot) and taints on the nodes; selectors and tolerations on jobs."""
    tainted = 0
    for n in request.cluster.nodes:
        n.labels.update({"zone": f"z{rng.randrange(4)}", "gen": str(rng.randint(1, 5))})
        if rng.random() < 0.3:
            n.labels["spot"] = ""
        if rng.random() < 0.2:
            effect = rng.choice([pb.TAINT_EFFECT_NO_SCHEDULE, pb.TAINT_EFFECT_NO_EXECUTE])
            n.taints.add(key="dedicated", value=rng.choice("ab"), effect=effect)
            tainted += 1
    selected = tolerant = 0
    for j in request.jobs:
        if rng.random() < 0.4:
            selected += 1
            for _ in range(rng.randint(1, 2)):
                term = j.node_selector.add()
                zones = [f"z{k}" for k in rng.sample(range(4), rng.randint(1, 3))]
                operator = rng.choice([pb.LABEL_OPERATOR_IN, pb.LABEL_OPERATOR_NOT_IN])
                term.requirements.add(key="zone", values=zones, operator=operator)
                if rng.random() < 0.5:
                    term.requirements.add(key="gen", operator=pb.LABEL_OPERATOR_GT, values=["2"])
                if rng.random() < 0.3:
                    term.requirements.add(key="spot", operator=pb.LABEL_OPERATOR_DOES_NOT_EXIST)
        if rng.random() < 0.5:
            tolerant += 1
            j.tolerations.add(key="dedicated", value=rng.choice("ab"))
    # Soft rules last (the draws above stay the seed's): preferred terms on 40 % of the jobs,
    # a PreferNoSchedule taint on a tenth of the nodes.
    preferring = soft = 0
    for j in request.jobs:
        if rng.random() < 0.4:
            preferring += 1
            for _ in range(rng.randint(1, 2)):
                term = j.node_preferences.add(weight=rng.randint(1, 100)).preference
                zones = [f"z{k}" for k in rng.sample(range(4), rng.randint(1, 2))]
                term.requirements.add(key="zone", values=zones, operator=pb.LABEL_OPERATOR_IN)
    for n in request.cluster.nodes:
        if rng.random() < 0.1:
            n.taints.add(key="maintenance", effect=pb.TAINT_EFFECT_PREFER_NO_SCHEDULE)
            soft += 1
    return f"rules={selected}sel/{tolerant}tol/{tainted}tainted/{preferring}pref/{soft}soft"


def evaluated(problem: Problem, plan: pb.Plan) -> tuple[bool, float]:
    """Whether the plan passes EvaluatePlan's checks, and its objective there (in this process,
    as the service's EvaluatePlan computes them)."""
    ev = evaluate_plan(
        problem,
        allocations_from_proto(plan),
        changes_from_proto(plan),
        actions_from_proto(plan),
        power_limits_from_proto(plan),
        settings=SolverSettings(),
    )
    if ev.violations or ev.plan is None:
        return False, 0.0
    return True, ev.plan.objective.total


def remote_faults(
    client: Client, request: pb.SolveRequest, backend: Backend, budget: float, slack: float
) -> tuple[dict[str, object], list[str]]:
    """One call through the service: its record and what went wrong (the plan checked here)."""
    sent = pb.SolveRequest()
    sent.CopyFrom(request)
    sent.options.time_budget.FromNanoseconds(round(budget * 1e9))
    sent.options.backend = backend_to_proto(backend)
    start = time.monotonic()
    try:
        response = client.solve(sent)
    except DsfroError as e:
        return {"error": str(e)}, ["raised"]
    wall = time.monotonic() - start
    return verdict(problem_from_proto(sent, LIMITS), response, wall, budget, slack)


def verdict(
    problem: Problem, response: pb.SolveResponse, wall: float, budget: float, slack: float
) -> tuple[dict[str, object], list[str]]:
    """An answer's record and what went wrong with it, however it came."""
    s = response.stats
    if s.termination == pb.TERMINATION_INFEASIBLE:
        return {"termination": "INFEASIBLE", "detail": s.detail[:300]}, ["INFEASIBLE"]
    valid, total = evaluated(problem, response.plan)
    bound = s.best_bound if s.HasField("best_bound") else None
    bad = []
    if not valid:
        bad.append("checker")
    if wall > budget + slack:
        bad.append("late")
    if bound is not None and s.objective > bound + 1e-6 * max(1.0, abs(bound)):
        bad.append("above its bound")
    # The termination rule's own tolerance (solver.core.incumbent): 1e-6 of max(|objective|, 1),
    # so below an objective of 1 the reported relative gap of an OPTIMAL answer may exceed 1e-6.
    if s.termination == pb.TERMINATION_OPTIMAL and not proven_optimal(s.objective, bound):
        bad.append("OPTIMAL with a gap")
    if valid and abs(total - s.objective) > 1e-6 * max(1.0, abs(s.objective)):
        bad.append("objective not EvaluatePlan's")
    record: dict[str, object] = {
        "wall": round(wall, 3),
        "objective": round(s.objective, 4),
        "bound": None if bound is None else round(bound, 4),
        "termination": pb.Termination.Name(s.termination),
        "detail": s.detail[:300],
    }
    return record, bad


def faults(
    p: Problem, solver: Solver, budget: float, slack: float
) -> tuple[dict[str, object], list[str]]:
    """One call: its record and what went wrong."""
    start = time.monotonic()
    try:
        r = solver.solve(p)
    except Exception:
        return {"error": traceback.format_exc()[-800:]}, ["raised"]
    wall = time.monotonic() - start
    return verdict(p, result_to_proto(r, p), wall, budget, slack)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=70)
    ap.add_argument("--slack", type=float, default=0.15, help="seconds past the budget allowed")
    ap.add_argument("--jsonl", type=Path, help="every call as a JSON line")
    ap.add_argument("--server", metavar="ADDR", help="call a running service instead")
    ap.add_argument("--request-features", action="store_true", help="random request features")
    ap.add_argument(
        "--energy-features",
        action="store_true",
        help="random base power, power saving, grid forecast, energy budget",
    )
    ap.add_argument(
        "--exact",
        default=",".join(b.name.lower() for b in EXACT),
        help="the backends the third call of a snapshot draws from (decomposed among them: "
        "the parts' path, which AUTO takes only from 4,096 nodes or 8,192 jobs)",
    )
    ap.add_argument(
        "--names",
        choices=MODES,
        default="catalog",
        help="GPU type names: the catalog's, Kubernetes' product names, or names no catalog "
        "knows with MIG geometries on the wire",
    )
    a = ap.parse_args(argv)
    try:
        exact = [Backend[name.strip().upper()] for name in a.exact.split(",")]
    except KeyError as e:
        ap.error(
            f"--exact: unknown backend {e} (one of {', '.join(b.name.lower() for b in Backend)})"
        )
    rng = random.Random(a.seed)
    features = random.Random(a.seed + 1_000_003) if a.request_features else None
    energy = random.Random(a.seed + 2_000_003) if a.energy_features else None
    solver = Solver()
    client = Client(a.server) if a.server else None
    out = a.jsonl.open("w") if a.jsonl else None
    calls = 0
    wrong: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for case in range(a.cases):
        args, request, problem = snapshot(rng, features, a.names, energy)
        for backend in (Backend.HEURISTIC, Backend.AUTO, rng.choice(exact)):
            budget = rng.choice(BUDGETS)
            options = dataclasses.replace(
                problem.options, time_budget_seconds=budget, backend=backend
            )
            if client is not None:
                record, bad = remote_faults(client, request, backend, budget, a.slack)
            else:
                record, bad = faults(
                    dataclasses.replace(problem, options=options), solver, budget, a.slack
                )
            calls += 1
            for what in bad:
                wrong[what] += 1
                examples.setdefault(what, f"{backend.name} at {budget} s: {' '.join(args)}")
            if out is not None:
                line = {"case": case, "args": " ".join(args), "backend": backend.name}
                print(
                    json.dumps({**line, "budget": budget, **record, "wrong": bad}),
                    file=out,
                    flush=True,
                )
    if out is not None:
        out.close()
    if client is not None:
        client.close()
    where = f"through {a.server}" if a.server else "in process"
    print(
        f"\n{a.cases} snapshots, {calls} calls {where} (seed {a.seed}, slack {a.slack} s, "
        f"{a.names} GPU names)\n"
    )
    print("| what went wrong | calls | first case |")
    print("| --- | --- | --- |")
    kinds = ("raised", "checker", "late", "above its bound", "OPTIMAL with a gap", "INFEASIBLE")
    for what in (*kinds, "objective not EvaluatePlan's"):
        print(f"| {what} | {wrong[what]} | {examples.get(what, '-')} |")
    hard = ("raised", "checker", "above its bound", "objective not EvaluatePlan's")
    return 1 if any(wrong[w] for w in hard) else 0


if __name__ == "__main__":
    sys.exit(main())
