"""A batch of probes as Ray tasks on the session's local Ray instance (shared with the load
test): the same batch.json as the same batch on local processes, every run directory
written here from what the tasks sent back."""

from __future__ import annotations

from replicalab.runtime.parallel import Workers
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.batch import parse_axis, plan_runs, run_batch
from replicalab.workloads.runner import ProbeSpec


def _build(point: dict[str, str]) -> ProbeSpec:
    return ProbeSpec(store=f"sim://quorum?r={point['r']}", workload="staleness",
                     options=ProbeOptions(duration_s=30))


def test_a_batch_on_ray_is_the_batch_on_local_processes(ray_local, tmp_path):
    plan = plan_runs(_build, [parse_axis("r=1,2")], 2, 1)
    with Workers(2, ray_address="local") as pool:
        assert pool.kind == "ray" and pool.ray_cpus == 2
        on_ray = run_batch(plan, tmp_path / "ray", pool)
    assert ray_local.is_initialized()  # the shared instance stays up
    with Workers(2) as pool:
        local = run_batch(plan, tmp_path / "local", pool)
    name = "batch.json"
    assert (on_ray.batch_dir / name).read_bytes() == (local.batch_dir / name).read_bytes()
    for r in plan:
        for f in ("results.json", "history.parquet", "config.json"):
            assert (on_ray.batch_dir / "runs" / r.label / f).exists()
        assert (on_ray.batch_dir / "runs" / r.label / "results.json").read_bytes() == (
            local.batch_dir / "runs" / r.label / "results.json").read_bytes()
    fresh = [p["merged"]["fresh in [0, 450) ms"]["pooled"]["p"]
             for p in on_ray.summary["points"]]
    assert fresh[0] < fresh[1] <= 1.0  # R=2 of N=3 reads staler data less often
