"""The checker's MIG rules, one ``check_*`` function per rule (listed in ``CHECKS``).

They re-derive the MIG geometry rules from the geometry's figures on their own (not through
``solver.mig.layout_problems``), so that a bug there shows up here as a violation: valid
layouts (starts, no shared memory slice, counts, SM slices), a slice job on an instance of its
GPU's layout after the plan, one job per instance, no whole-GPU job on a partitioned GPU, and
no layout change under a running instance unless the plan moves its job.
"""

from __future__ import annotations

from collections.abc import Iterator

from solver.domain import JobState
from solver.mig import GpuLayout
from solver.scoring.view import Check, PlanView, PlanViolation, Running


def _layout_faults(view: PlanView, gpu_type: str, layout: GpuLayout) -> Iterator[str]:
    geometry = view.problem.cluster.mig.get(gpu_type)
    if not layout.instances:
        return
    if geometry is None:
        yield f"{gpu_type} has no MIG geometry"
        return
    taken: set[int] = set()
    counts: dict[str, int] = {}
    sm = 0
    for inst in layout.instances:
        p = geometry.profiles.get(inst.profile)
        if p is None:
            yield f"unknown profile {inst.profile}"
            continue
        if inst.start not in p.starts:
            yield f"{p.name} cannot start at {inst.start}"
        cells = set(range(inst.start, inst.start + p.memory_slices))
        if cells & taken or max(cells) >= geometry.memory_slices:
            yield f"{p.name}@{inst.start} overlaps another instance or leaves the GPU"
        taken |= cells
        counts[p.name] = counts.get(p.name, 0) + 1
        sm += p.compute_slices
    for name, n in counts.items():
        if n > geometry.profiles[name].max_count:
            yield f"{n} instances of {name} (at most {geometry.profiles[name].max_count})"
    if sm > geometry.compute_slices:
        yield f"{sm} SM slices (at most {geometry.compute_slices})"


def check_layout_changes(view: PlanView) -> Iterator[PlanViolation]:
    """Each layout change names an existing, available GPU once, carries no jobs, and gives it
    a layout its type can have."""
    seen: set[tuple[str, int]] = set()
    for change in view.layout_changes:
        node, g = view.nodes.get(change.node), change.layout.gpu_index
        where = f"GPU {change.node}/{g}"
        if node is None or not 0 <= g < node.gpu_count or g in node.unavailable_gpu_indices:
            yield PlanViolation("mig_layout", "", f"{where} does not exist or is unavailable")
            continue
        if (node.name, g) in seen:
            yield PlanViolation("mig_layout", "", f"{where} is changed twice")
        seen.add((node.name, g))
        if any(i.job for i in change.layout.instances):
            yield PlanViolation("mig_layout", "", f"{where}: a new layout names jobs")
        for fault in _layout_faults(view, node.gpu_type, change.layout):
            yield PlanViolation("mig_layout", "", f"{where}: {fault}")


def _slice_gpu(view: PlanView, r: Running) -> tuple[str, int] | None:
    gpus = list(view.gpus(r))
    return (gpus[0][0].name, gpus[0][1]) if len(gpus) == 1 else None


def check_slice_assignment(view: PlanView) -> Iterator[PlanViolation]:
    """A job on an instance allows slices (within its bounds), has a one-GPU configuration of
    that profile whose memory fits it, and the instance is in its GPU's layout after the plan."""
    for r in view.running:
        a, c, job = r.assignment, r.config, r.job
        if a.mig is None:
            if c.mig_profile:
                yield PlanViolation(
                    "mig_instance", job.name, "a slice configuration without an instance"
                )
            continue
        geometry = view.problem.cluster.mig.get(c.gpu_type)
        profile = geometry.profiles.get(a.mig.profile) if geometry is not None else None
        stays = job.current is not None and job.current.mig == a.mig and _same_gpu(view, r)
        if job.slices is None or profile is None or geometry is None:
            yield PlanViolation("mig_instance", job.name, f"the job may not run on {a.mig.profile}")
            continue
        if not stays and not job.slices.allows(geometry, profile.name):
            yield PlanViolation("mig_instance", job.name, f"{profile.name} is outside its bounds")
        if c.mig_profile != profile.name or c.num_gpus != 1:
            yield PlanViolation("mig_instance", job.name, "configuration and instance disagree")
        if c.memory_per_gpu_gib > profile.memory_gib and not stays:
            yield PlanViolation(
                "mig_memory",
                job.name,
                f"{c.memory_per_gpu_gib:.1f} GiB exceeds {profile.name}'s {profile.memory_gib:g}",
            )
        gpu = _slice_gpu(view, r)
        if gpu is None:
            yield PlanViolation("mig_instance", job.name, "a slice job is on exactly one GPU")
            continue
        if a.mig.place not in view.layout(view.nodes[gpu[0]], gpu[1]).places():
            yield PlanViolation(
                "mig_instance",
                job.name,
                f"{a.mig.profile}@{a.mig.start} is not in the layout of GPU {gpu[0]}/{gpu[1]}",
            )


def _same_gpu(view: PlanView, r: Running) -> bool:
    cur = r.job.current
    if cur is None:
        return False
    old = [(s.node, i) for s in cur.placement for i in s.gpu_indices]
    return [_slice_gpu(view, r)] == old


def check_one_job_per_instance(view: PlanView) -> Iterator[PlanViolation]:
    """Never two jobs on one instance."""
    owner: dict[tuple[str, int, str, int], str] = {}
    for r in view.sliced:
        gpu = _slice_gpu(view, r)
        if gpu is None or r.assignment.mig is None:
            continue
        key = (*gpu, *r.assignment.mig.place)
        if key in owner:
            yield PlanViolation("mig_capacity", r.job.name, f"its instance is also {owner[key]}'s")
        owner[key] = r.job.name


def check_whole_gpu_not_partitioned(view: PlanView) -> Iterator[PlanViolation]:
    """A whole-GPU job's GPUs have no MIG instances after the plan."""
    for r in view.whole:
        for node, i in view.gpus(r):
            if not view.layout(node, i).whole:
                yield PlanViolation(
                    "mig_whole_gpu", r.job.name, f"GPU {node.name}/{i} is partitioned"
                )


def check_no_change_under_running(view: PlanView) -> Iterator[PlanViolation]:
    """A layout change keeps every instance running now, unless the plan moves or stops its
    job; a GPU a whole-GPU job holds now is partitioned only if that job leaves it."""
    plan = {a.job: a for _, a in view.unique}
    for change in view.layout_changes:
        node = view.nodes.get(change.node)
        if node is None:
            continue
        g = change.layout.gpu_index
        kept = change.layout.places()
        for inst in view.current_layout(node, g).instances:
            a = plan.get(inst.job)
            if not inst.job or a is None or a.state is not JobState.RUNNING:
                continue
            on_it = (
                a.mig is not None
                and a.mig.place == inst.place
                and any(s.node == node.name and g in s.gpu_indices for s in a.placement)
            )
            if on_it and inst.place not in kept:
                yield PlanViolation(
                    "mig_reconfigure", inst.job, f"GPU {node.name}/{g} is reconfigured under it"
                )
        if not change.layout.whole:
            for job in view.jobs.values():
                cur = job.current
                if cur is None or cur.mig is not None:
                    continue
                held = any(s.node == node.name and g in s.gpu_indices for s in cur.placement)
                a = plan.get(job.name)
                stays = (
                    a is not None
                    and a.state is JobState.RUNNING
                    and a.mig is None
                    and any(s.node == node.name and g in s.gpu_indices for s in a.placement)
                )
                if held and stays:
                    yield PlanViolation(
                        "mig_reconfigure", job.name, f"GPU {node.name}/{g} is partitioned under it"
                    )


def check_shared_clock(view: PlanView) -> Iterator[PlanViolation]:
    """The jobs on the instances of one GPU run at one SM clock (the clock is the GPU's)."""
    clock: dict[tuple[str, int], tuple[int, str]] = {}
    for r in view.sliced:
        gpu = _slice_gpu(view, r)
        if gpu is None:
            continue
        first = clock.setdefault(gpu, (r.config.sm_clock_mhz, r.job.name))
        if first[0] != r.config.sm_clock_mhz:
            yield PlanViolation(
                "mig_clock",
                r.job.name,
                f"{r.config.sm_clock_mhz} MHz on GPU {gpu[0]}/{gpu[1]}, where {first[1]} runs "
                f"at {first[0]} MHz",
            )


def check_non_preemptible_slice(view: PlanView) -> Iterator[PlanViolation]:
    """A running non-preemptible job on an instance keeps that instance."""
    for r in view.running:
        cur = r.job.current
        if cur is None or cur.mig is None or r.job.preemptible:
            continue
        if r.assignment.mig != cur.mig or not _same_gpu(view, r):
            yield PlanViolation(
                "non_preemptible", r.job.name, "a non-preemptible job leaves its instance"
            )


CHECKS: tuple[Check, ...] = (
    check_layout_changes,
    check_slice_assignment,
    check_one_job_per_instance,
    check_whole_gpu_not_partitioned,
    check_no_change_under_running,
    check_shared_clock,
    check_non_preemptible_slice,
)
"""The MIG rules, in the order their violations are reported."""
