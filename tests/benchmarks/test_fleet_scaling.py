"""benchmarks/fleet.py's arithmetic: the harness share, the cores a worker keeps busy, from what core count
N workers pay off, the speed-up that predicts, and the conclusion it prints (no run: synthetic figures)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load_fleet():
    spec = importlib.util.spec_from_file_location("benchmark_fleet", BENCHMARKS / "fleet.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)  # which puts benchmarks/ on sys.path and imports its siblings from it
    finally:
        # benchmarks/robocasa.py, sandbox.py, video.py must not stand in for the real packages in later tests
        sys.path[:] = path
    return module, sys.modules.pop("machine"), sys.modules.pop("series")


fleet, machine, _ = _load_fleet()


def _row(trial: int, wall: float, overhead: float, load: float = 0.0) -> dict:
    zero = {k: 0.0 for k in ("participant_s", "physics_s", "rendering_s", "recording_s", "context_s", "transport_s")}
    return {**zero, "trial": trial, "outcome": "success", "steps": 50, "wall_s": wall, "load_s": load,
            "overhead_s": overhead, "overhead_share": overhead / wall}


def test_the_harness_share_is_total_overhead_over_total_trial_wall_not_a_mean_of_shares():
    summary = fleet.summarize([_row(1, 2.0, 0.2), _row(2, 4.0, 0.2)])
    assert summary["overhead_share"] == pytest.approx(0.4 / 6.0)  # the mean of 10% and 5% would be 7.5%


def test_the_harness_share_without_the_scene_load_takes_the_load_off_both():
    summary = fleet.summarize([_row(1, 5.0, 2.0, load=1.5), _row(2, 3.0, 0.5, load=0.5)])
    assert summary["overhead_excl_load_share"] == pytest.approx((2.5 - 2.0) / (8.0 - 2.0))


def test_a_worker_keeps_its_cpu_over_the_wall_with_the_wait_for_a_cpu_taken_off():
    low, high = fleet.cores_per_worker(cpu_s=4.0, wall_s=10.0, wait_some_s=6.0, wait_full_s=5.0)
    assert (low, high) == pytest.approx((4.0 / 5.0, 4.0 / 4.0))


def test_without_wait_figures_both_bounds_are_cpu_over_the_measured_wall():
    assert fleet.cores_per_worker(4.0, 10.0, None, None) == pytest.approx((0.4, 0.4))


def test_a_wait_that_leaves_no_wall_gives_no_estimate():
    # 9.8 of 10 s waiting would make 4 CPU-s a 20-core worker: the next estimate stands instead
    assert fleet.cores_per_worker(4.0, 10.0, wait_some_s=9.8, wait_full_s=5.0) == pytest.approx((0.8, 0.8))
    assert fleet.cores_per_worker(4.0, 10.0, wait_some_s=9.9, wait_full_s=9.8) == pytest.approx((0.4, 0.4))


@pytest.mark.parametrize(("each", "workers", "cores"), [(1.3, 2, 3), (1.3, 4, 6), (1.0, 2, 2), (0.3, 2, 1), (0.3, 1, 1)])
def test_n_workers_pay_off_from_n_times_the_cores_each_keeps_busy_rounded_up(each, workers, cores):
    assert fleet.pays_off_from(each, workers) == cores


def test_the_predicted_speed_up_is_linear_until_the_cores_bind():
    assert fleet.predicted_speedup(2, cores=4.0, cores_each=1.3) == pytest.approx(2.0)
    assert fleet.predicted_speedup(2, cores=2.0, cores_each=1.3) == pytest.approx(2.0 / 1.3)
    assert fleet.predicted_speedup(4, cores=2.0, cores_each=1.3) == pytest.approx(2.0 / 1.3)  # no more than two
    # one worker squeezed onto half a core by other jobs, two onto 1.3 cores: 1.0 against 0.385 worker-speeds
    assert fleet.predicted_speedup(2, cores=1.3, cores_each=1.3, base_cores=0.5) == pytest.approx(1.0 / (0.5 / 1.3))


def _run(workers: int, span: float, cpu: float, others: float, some: float | None = 0.0, full: float | None = 0.0):
    return {"workers": workers, "trials": 8, "span_s": span, "cpu_per_trial_s": cpu, "cores_busy": (cpu or 0.0) * 8 / span, "wait_some_per_trial_s": some,
            "wait_full_per_trial_s": full, "others_cores": others, "load1_mean": 2.0 + others}


def test_the_conclusion_is_drawn_from_the_one_worker_run_and_checked_against_the_others():
    runs = [_run(1, span=16.0, cpu=2.6, others=0.0), _run(2, span=10.0, cpu=2.7, others=0.0)]
    s = fleet.scaling(runs, cores=2)
    assert s["cores_per_worker"] == pytest.approx((1.3, 1.3))  # 2.6 CPU-s over 2 s per trial
    assert s["pays_off_from"] == {2: (3, 3)}
    assert any("a second worker pays off from 3 cores" in line for line in s["conclusion"])
    assert any("does not pay off fully" in line and "x1.54-1.54 for 2" in line for line in s["conclusion"])
    assert any(line.startswith("2 workers:") and "measured x1.60" in line for line in s["conclusion"])
    assert not any("under load" in line for line in s["conclusion"])  # a quiet machine's figures are not bounds


def test_a_machine_with_room_for_two_says_so_and_further_counts_get_their_own_core_count():
    runs = [_run(1, span=16.0, cpu=1.2, others=0.0), _run(4, span=5.0, cpu=1.2, others=0.0)]
    s = fleet.scaling(runs, cores=2)
    assert s["pays_off_from"] == {2: (2, 2), 4: (3, 3)}
    assert any("4 workers from 3 cores" in line for line in s["conclusion"])
    assert any("hold two workers at full speed" in line for line in s["conclusion"])


def test_the_cpu_a_trial_costs_is_the_slope_of_cores_busy_over_trials_per_second():
    # 0.25 cores idle plus 2.5 CPU-s per trial: at 8 trials in 120 s and in 30 s
    runs = [{**_run(1, span=120.0, cpu=0.0, others=0.0), "cores_busy": 0.25 + 2.5 * 8 / 120},
            {**_run(4, span=30.0, cpu=0.0, others=0.0), "cores_busy": 0.25 + 2.5 * 8 / 30}]
    assert fleet.cpu_per_trial_and_idle(runs) == pytest.approx((2.5, 0.25))
    assert fleet.cpu_per_trial_and_idle(runs[:1]) is None  # one point draws no line


def test_memory_per_further_worker_is_the_peak_above_the_one_worker_run_per_added_worker():
    runs = [{**_run(1, span=16.0, cpu=1.2, others=0.0), "peak_memory_gib": 3.0},
            {**_run(2, span=9.0, cpu=1.2, others=0.0), "peak_memory_gib": 4.5},
            {**_run(4, span=5.0, cpu=1.2, others=0.0), "peak_memory_gib": 7.8}]
    s = fleet.scaling(runs, cores=2)
    assert s["memory_per_further_worker_gib"] == pytest.approx([1.5, 1.6])
    assert any("3.0 GiB with one worker, 1.50-1.60 GiB more for each further worker" in line for line in s["conclusion"])


def test_figures_from_a_loaded_machine_are_called_bounds_and_their_wait_taken_off():
    runs = [_run(1, span=40.0, cpu=2.6, others=1.5, some=3.0, full=2.0)]  # 5 s per trial, 2-3 s of it waiting
    s = fleet.scaling(runs, cores=2)
    assert s["cores_per_worker"] == pytest.approx((2.6 / 3.0, 2.6 / 2.0))
    assert s["pays_off_from"][2] == (2, 3)
    assert any("measured under load (others used up to 1.5 of 2 cores)" in line for line in s["conclusion"])


def test_no_one_worker_run_no_conclusion():
    assert fleet.scaling([_run(2, span=10.0, cpu=2.6, others=0.0)], cores=2) is None
    assert fleet.scaling([_run(1, span=10.0, cpu=None, others=0.0)], cores=2) is None  # --ray: CPU not measured


def _sample(at: float, cpu: float, busy: float, some: float | None = None) -> object:
    return machine.Sample(at=at, cpu_s=cpu, wait_some_s=some, wait_full_s=some, load1=at, machine_busy_s=busy,
                          machine_steal_s=0.0)


def test_usage_over_a_span_is_interpolated_between_the_samples_around_it():
    samples = [_sample(0.0, 0.0, 0.0, some=0.0), _sample(1.0, 1.0, 2.0, some=0.5), _sample(2.0, 3.0, 4.0, some=0.5)]
    used = machine.usage_between(samples, 0.5, 1.5)
    assert used.cpu_s == pytest.approx(2.0 - 0.5)
    assert used.wait_some_s == pytest.approx(0.5 - 0.25)
    assert used.others_cores == pytest.approx(((3.0 - 1.0) - 1.5) / 1.0)  # the machine's busy time less the run's
    assert (used.load1_mean, used.load1_max) == (1.0, 1.0)  # the one sample inside the span


def test_a_tree_sampled_without_a_group_has_no_wait_figures():
    used = machine.usage_between([_sample(0.0, 0.0, 0.0), _sample(2.0, 1.0, 3.0)], 0.0, 2.0)
    assert used.wait_some_s is None and used.wait_full_s is None
    assert used.cpu_s == pytest.approx(1.0) and used.others_cores == pytest.approx(1.0)
