"""One run's headline metrics as `dsfro simulate` prints them."""

from __future__ import annotations

from solver.simulate.metrics import Summary


def format_summary(s: Summary) -> str:
    """The headline metrics of one run, one per line."""
    d = s.to_dict()
    keys: tuple[str, ...] = (
        "jobs_finished",
        "jct_mean_s",
        "jct_p95_s",
        "queue_mean_s",
        "makespan_s",
        "energy_kwh",
        "energy_horizon_kwh",
        "horizon_s",
        "jobs_energy_kwh",
        "jobs_energy_per_sample_j",
        "carbon_horizon_kg",
        "queue_max_s",
        "over_budget_share",
        "max_excess",
        "utilisation_busy",
        "migrations_per_job",
        "preemptions_per_job",
        "restarts_per_job",
        "restart_gpu_share",
        "deadline_hit_rate",
        "solver_p99_s",
    )
    if s.jct_small_mean_s is not None:  # a trace with small jobs (MIG slices)
        keys += (
            "jct_small_mean_s",
            "jct_large_mean_s",
            "gpu_work_per_gpu_hour",
            "small_on_slices",
            "reconfigurations",
            "invalid_layouts",
        )
    if s.suspends is not None:  # the cluster's node power saving was on
        keys += ("suspends", "resumes", "node_hours_suspended", "resume_gpu_hours")
    width = max(len(k) for k in keys)
    lines = [f"{s.scenario} / {s.policy} / seed {s.seed}"]
    for k in keys:
        if k in d:
            v = d[k]
            lines.append(
                f"  {k.ljust(width)}  {v:.6g}"
                if isinstance(v, float)
                else f"  {k.ljust(width)}  {v}"
            )
    if s.tenants:
        lines.append(
            "  per tenant: mean JCT (s), GPU-h received / entitled, borrowed GPU-h, max rho"
        )
        for t in s.tenants.values():
            entitled = "-" if t.entitled_gpu_hours is None else f"{t.entitled_gpu_hours:.4g}"
            jct = "-" if t.jct_mean_s is None else f"{t.jct_mean_s:.4g}"
            rho = "-" if t.rho_max is None else f"{t.rho_max:.3g}"
            lines.append(
                f"    {t.tenant}: {jct}, {t.gpu_hours:.4g} / {entitled}, "
                f"{t.borrowed_gpu_hours:.4g}, {rho}"
            )
    return "\n".join(lines)
