"""Mutation gate: break each core guarantee on purpose, in a copy of the repository, and check that the
test named for it fails.

Each mutation names a file, an exact snippet of it (which must occur exactly once), its replacement and
the test node ids that must catch it. The gate copies the repository (tracked files, from HEAD or the
working tree) into a temporary directory, makes the copy importable as ``roboswe.*`` (the pyproject
``package-dir`` mapping, rebuilt as symlinks inside the copy's ``roboswe/``, and the copy first on
``PYTHONPATH``: the editable install's finder comes after ``sys.path``, so nothing is installed), runs
every named test once unmutated (the baseline: all must pass), then per mutation applies it, runs its
tests (``-x``) and restores the file. A mutation is *caught* when its tests fail, *survived* when they
pass. It prints a markdown table and exits 1 if any mutation survived or the baseline failed.

    .venv/bin/python tools/mutation_gate.py                 # every mutation, copy of the working tree
    .venv/bin/python tools/mutation_gate.py --source head --only verify-states-off docker-network-mode
    .venv/bin/python tools/mutation_gate.py --list

Sandbox tests need the sandbox image current with the copy's robot module (``roboswe images build``);
the bwrap/docker tests need what the suite needs (bubblewrap, dockerd).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    guarantee: str
    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]


DIVERGENCE = "tests/evaluation/test_replay_divergence.py"
CONFIGURATION = "tests/sandbox/test_configuration.py"
PEER_DEATH = ("tests/evaluation/test_interrupt_on_death.py::"
              "test_a_series_whose_bridge_dies_under_a_waiting_trial_ends_it_interrupted_and_reruns_it_linked")

MUTATIONS: tuple[Mutation, ...] = (
    Mutation("verify-states-off", "replay compares every control step's physics state",
             "roboswe/evaluation/verify.py", "    if bad.size:\n", "    if False and bad.size:\n",
             (f"{DIVERGENCE}::test_compare_states_names_the_first_tampered_step_and_ignores_nothing_else",
              f"{DIVERGENCE}::test_robot_moving_differently_with_the_same_output_is_a_mismatch_at_the_first_divergent_step")),
    Mutation("verify-actions-off", "replay compares every control step's commanded action",
             "roboswe/evaluation/verify.py", "    if differing.size:\n", "    if False and differing.size:\n",
             ("tests/evaluation/test_action_evidence.py::test_a_tampered_recorded_action_is_a_mismatch_at_its_step",)),
    Mutation("success-reproduced-forced", "replay checks the success interval",
             "roboswe/evaluation/verify.py",
             "reproduced = (interval == original) and replay_outcome == view.end.outcome",
             "reproduced = True",
             (f"{DIVERGENCE}::test_a_different_success_interval_is_a_mismatch_even_when_every_exec_agrees",)),
    Mutation("output-is-a-mismatch", "a program's output on replay is recorded, never a mismatch (the score is the robot's)",
             "roboswe/evaluation/verify.py", "if moved := [k for k in differs if k in EXECUTION]:", "if moved := differs:",
             (f"{DIVERGENCE}::test_a_different_exit_status_is_recorded_but_not_a_mismatch_and_the_failure_scores_0",)),
    Mutation("replay-image-unchecked", "replay runs in the trial's sandbox image",
             "roboswe/evaluation/verify.py", "if opened_msg.image_digest != pinned.image_digest:", "if False:",
             (f"{DIVERGENCE}::test_a_different_sandbox_image_at_replay_is_an_error_not_a_verdict",)),
    Mutation("replay-fingerprint-unchecked", "replay runs on the admitted scene",
             "roboswe/evaluation/verify.py", "if fp != view.start.fingerprint or fp != reference_fingerprint:", "if False:",
             (f"{DIVERGENCE}::test_a_different_fresh_scene_fingerprint_at_replay_is_an_error",)),
    Mutation("slide-units-inflated", "a slide removes at least 200,000 units",
             "roboswe/context/policy.py", "            removed_units += units\n", "            removed_units += units * 10\n",
             ("tests/providers/test_context_floor.py",)),
    Mutation("slide-record-inflated", "the slide record reports what was removed",
             "roboswe/context/policy.py", "after_units=after, removed_units=removed_units,",
             "after_units=after, removed_units=removed_units * 10,",
             ("tests/providers/test_context_floor.py",)),
    Mutation("robot-invalid-action-error", "the sandbox runs the checkout's robot module",
             "bridge/robot.py", "                raise InvalidAction(reply.detail)\n", "                raise BridgeError(reply.detail)\n",
             ("tests/sandbox/test_robot_api.py::test_invalid_action_is_rejected_not_clipped",)),
    Mutation("docker-network-mode", "a docker sandbox has no network",
             "sandbox/_docker.py", '            network_mode="none",\n', "",
             (f"{CONFIGURATION}::test_docker_trial_container_settings",)),
    Mutation("docker-capabilities-kept", "a docker sandbox has no capabilities",
             "sandbox/_docker.py", '            cap_drop=["ALL"],\n', "",
             (f"{CONFIGURATION}::test_docker_trial_container_settings",)),
    Mutation("bwrap-userns-allowed", "a bwrap sandbox cannot make a user namespace",
             "sandbox/_bwrap.py", '            "--disable-userns",  # no nested user namespaces for the program\n', "",
             (f"{CONFIGURATION}::test_only_loopback_no_capabilities_no_new_privileges_no_user_namespaces",)),
    Mutation("sim-action-bounds-off", "an action outside its bounds is rejected, never clipped",
             "sim/robosuite/backend.py", "            if v < lo or v > hi:\n", "            if False:\n",
             ("tests/sim/robosuite/test_backend.py::test_invalid_action_is_rejected_and_physics_untouched",)),
    Mutation("door-action-screen-off", "the bridge refuses bad actions before the simulator",
             "bridge/door.py", "        problem = check_actions(rows, spec)\n", "        problem = None\n",
             ("tests/bridge/test_door.py::test_bad_actions_and_exhausted_budgets_never_reach_the_simulator",)),
    Mutation("script-step-budget-off", "a script gets at most its step budget",
             "bridge/door.py", "            allowed = rows[: session.steps_left]\n", "            allowed = rows\n",
             ("tests/bridge/test_door.py::test_bad_actions_and_exhausted_budgets_never_reach_the_simulator",)),
    Mutation("trial-step-budget-off", "a trial gets at most its step budget",
             "sim/backend.py", "            if self.steps_left <= 0:\n", "            if False:\n",
             ("tests/sim/robosuite/test_backend.py::test_trial_budget_stops_a_chunk_and_reports_applied",)),
    Mutation("append-only-triggers-dropped", "nothing written to the run database is rewritten",
             "roboswe/records/store.py", '            for action in ("UPDATE", "DELETE"):\n', "            for action in ():\n",
             ("tests/records/test_store.py::test_tables_refuse_update_and_delete",)),
    Mutation("fingerprint-seed-dropped", "the fingerprint covers the seed",
             "sim/robosuite/backend.py", '"initial_state_sha256": state_sha, "seed": seed,', '"initial_state_sha256": state_sha,',
             ("tests/sim/test_fingerprint_inputs.py",)),
    Mutation("admission-fingerprint-unchecked", "admission excludes a scene that differs between processes",
             "roboswe/evaluation/admission.py", 'elif a["fingerprint"] != b["fingerprint"]:', "elif False:",
             ("tests/evaluation/test_readme_claims.py::"
              "test_admission_excludes_a_scene_whose_fingerprint_differs_between_two_fresh_processes",)),
    Mutation("api-key-logged", "the API key is never written to disk",
             "roboswe/providers/_hosted.py", "    return key\n", '    log.info("provider_key_read", key=key)\n    return key\n',
             ("tests/series/test_secrets.py",)),
    Mutation("mismatch-scored", "a success counts only once its replay agrees",
             "roboswe/records/metrics.py",
             '    if verification.verdict == "verified" and verification.outcome_reproduced:\n',
             "    if True:\n",
             ("tests/records/test_scoring.py::test_every_kind_of_slot_scores_as_worked_by_hand",)),
    Mutation("diverged-failure-unscored", "a replayed failure scores 0 whatever its replay did",
             "roboswe/records/metrics.py", '    if end.outcome == "failure":  # verified or diverged',
             '    if end.outcome == "failure" and verification.verdict == "verified":  # verified or diverged',
             ("tests/records/test_scoring.py::test_every_kind_of_slot_scores_as_worked_by_hand",)),
    Mutation("unverified-scored", "a never-replayed slot is not scored",
             "roboswe/records/metrics.py", '        return TrialSlot(**common, status="unverified")\n',
             "        return TrialSlot(**common, status=end.outcome)\n",
             ("tests/records/test_scoring.py::test_every_kind_of_slot_scores_as_worked_by_hand",)),
    Mutation("peer-death-unwatched", "a peer that dies under a trial ends it, even one the trial is not asking",
             "roboswe/evaluation/peers.py", "                    if replaced or not link.peer_alive:\n",
             "                    if False:\n", (PEER_DEATH,)),
    Mutation("trial-unguarded", "the trial runs its participant phase under the peers' watch",
             "roboswe/evaluation/trial.py", "async with self.links.interrupt_on_death():", "if True:", (PEER_DEATH,)),
)


# ---- the copy -----------------------------------------------------------------------------------------


def copy_repository(dest: Path, source: str) -> None:
    """Tracked files of HEAD (``head``) or of the working tree (``worktree``) into ``dest``."""
    if source == "head":
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], check=True, capture_output=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def link_packages(root: Path) -> None:
    """Rebuild pyproject's package-dir mapping as symlinks under root/roboswe, so the copy imports as installed."""
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(mapping.items()):
        parts = package.split(".")
        if parts[0] != "roboswe" or len(parts) == 1:
            continue
        where = root.joinpath(*parts)
        target = root / folder
        if where.resolve() == target.resolve() or where.exists():
            continue  # already in place (roboswe.providers), or inside a linked parent (roboswe.agents.lift_demo)
        where.symlink_to(os.path.relpath(target, where.parent), target_is_directory=True)


def copy_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env.update(PYTHONPATH=str(root), PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")  # no stale .pyc of a mutant
    return env


def check_imports(root: Path) -> None:
    """Every roboswe package must come from the copy, not the editable install; raises SystemExit otherwise."""
    probe = ("import importlib, json\n"
             "names = ['roboswe', 'roboswe.evaluation.verify', 'roboswe.context.policy', 'roboswe.protocol', "
             "'roboswe.actors', 'roboswe.bridge.door', 'roboswe.sim.robosuite.backend', 'roboswe.sandbox.images', "
             "'roboswe.records.store', 'roboswe.agents']\n"
             "print(json.dumps({n: importlib.import_module(n).__file__ for n in names}))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, env=copy_env(root), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"mutation gate: the copy does not import: {out.stderr[-2000:]}")
    import json

    outside = {n: f for n, f in json.loads(out.stdout).items() if not f.startswith(str(root))}
    if outside:
        raise SystemExit(f"mutation gate: these modules came from outside the copy {root}: {outside}")


def run_tests(root: Path, tests: list[str], timeout: float) -> tuple[int, float, str]:
    """pytest on the copy; returns (exit code, seconds, output tail). Exit code 124 on timeout."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header", *tests]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=root, env=copy_env(root), capture_output=True, text=True, timeout=timeout)
        return proc.returncode, time.monotonic() - t0, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, time.monotonic() - t0, out[-3000:]


# ---- the gate ---------------------------------------------------------------------------------------


def check_snippets(root: Path, mutations: list[Mutation]) -> list[str]:
    problems = []
    for m in mutations:
        path = root / m.path
        if not path.is_file():
            problems.append(f"{m.name}: {m.path} does not exist")
            continue
        n = path.read_text().count(m.original)
        if n != 1:
            problems.append(f"{m.name}: the snippet occurs {n} times in {m.path} (must be once): update the gate")
    return problems


def gate(mutations: list[Mutation], *, source: str, timeout: float, keep: bool, skip_baseline: bool) -> int:
    root = Path(tempfile.mkdtemp(prefix="roboswe-mutants-"))
    root.chmod(0o755)
    results: list[tuple[Mutation, str, float]] = []
    try:
        copy_repository(root, source)
        link_packages(root)
        check_imports(root)
        problems = check_snippets(root, mutations)
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
        tests = sorted({t for m in mutations for t in m.tests})
        if not skip_baseline:
            code, seconds, tail = run_tests(root, tests, timeout * 3)
            print(f"baseline: {len(tests)} test node(s) unmutated, exit {code}, {seconds:.1f} s", flush=True)
            if code != 0:
                print(f"mutation gate: the baseline fails, so no mutation can be judged:\n{tail}", file=sys.stderr)
                return 1
        for m in mutations:
            path = root / m.path
            original = path.read_text()
            path.write_text(original.replace(m.original, m.replacement, 1))
            try:
                code, seconds, tail = run_tests(root, list(m.tests), timeout)
            finally:
                path.write_text(original)
            verdict = {0: "SURVIVED", 124: "timeout", 5: "no tests ran"}.get(code, "caught")
            results.append((m, verdict, seconds))
            print(f"{m.name}: {verdict} ({seconds:.1f} s)", flush=True)
            if verdict == "caught":  # say how, so a mutant caught by an import error or a crash shows as such
                for line in [x for x in tail.splitlines() if x.startswith(("FAILED", "ERROR"))][:2]:
                    print(f"    {line[:300]}", flush=True)
            else:
                print(tail, file=sys.stderr)
    finally:
        if keep:
            print(f"copy kept at {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(table(results))
    return 0 if all(v == "caught" for _, v, _ in results) else 1


def table(results: list[tuple[Mutation, str, float]]) -> str:
    lines = ["| mutation | guarantee broken | file | catching test(s) | result | seconds |", "|---|---|---|---|---|---|"]
    for m, verdict, seconds in results:
        tests = "<br>".join(f"`{t}`" for t in m.tests)
        lines.append(f"| `{m.name}` | {m.guarantee} | `{m.path}` | {tests} | {verdict} | {seconds:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutations")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    # The sandbox image is built from the working tree, so its tracked files are what the image matches.
    parser.add_argument("--source", choices=["head", "worktree"], default="worktree",
                        help="copy the working tree's tracked files (default) or HEAD")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per mutation's test run (default 600)")
    parser.add_argument("--skip-baseline", action="store_true", help="do not run the tests unmutated first")
    parser.add_argument("--keep", action="store_true", help="keep the copy for inspection")
    args = parser.parse_args(argv)
    chosen = list(MUTATIONS)
    if args.only:
        unknown = set(args.only) - {m.name for m in MUTATIONS}
        if unknown:
            parser.error(f"unknown mutation(s) {sorted(unknown)}; known: {[m.name for m in MUTATIONS]}")
        chosen = [m for m in MUTATIONS if m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.guarantee} ({m.path}) -> {', '.join(m.tests)}")
        return 0
    return gate(chosen, source=args.source, timeout=args.timeout, keep=args.keep, skip_baseline=args.skip_baseline)


if __name__ == "__main__":
    sys.exit(main())
