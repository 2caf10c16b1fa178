"""Hostile programs: each attempt is denied or contained, the bridge keeps serving the next script,
and every attempt shows in the events. Attacks on the bridge's wire (forged requests, floods) are in
test_hostile_wire.py."""

from __future__ import annotations

import os
import socket
import time

import pytest
import trio
from roboswe.protocol.bridge import ScriptLimits
from structlog.testing import capture_logs


async def _still_serving(trial) -> None:
    before = trial.robot.control_step
    fb = await trial.run("import robot; robot.step([0, 0, 0, 0]); print('ok')", name="next.py")
    assert fb.exit_status == 0 and fb.stdout == "ok\n", fb.stderr
    assert trial.robot.control_step == before + 1


async def test_network_is_unreachable_including_host_loopback(trial):
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    tport, uport = tcp.getsockname()[1], udp.getsockname()[1]
    fb = await trial.run(
        f"""
        import socket
        for host, port in [("127.0.0.1", {tport}), ("1.1.1.1", 53), ("8.8.8.8", 443), ("10.0.0.1", 80), ("::1", {tport})]:
            try:
                s = socket.create_connection((host, port), timeout=2)
                print("CONNECTED", host)
            except OSError as e:
                print("tcp denied", host, type(e).__name__)
        try:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.sendto(b"hello", ("127.0.0.1", {uport}))
            u.sendto(b"hello", ("8.8.8.8", 53))
            print("udp sent (into the sandbox's own loopback)")
        except OSError as e:
            print("udp denied", type(e).__name__)
        try:
            print("RESOLVED", socket.getaddrinfo("example.com", 80))
        except OSError as e:
            print("dns denied", type(e).__name__)
        """
    )
    assert fb.exit_status == 0, fb.stderr
    assert "CONNECTED" not in fb.stdout and "RESOLVED" not in fb.stdout, fb.stdout
    assert fb.stdout.count("tcp denied") == 5 and "dns denied" in fb.stdout
    await trio.sleep(0.2)
    with pytest.raises(BlockingIOError):
        tcp.accept()
    with pytest.raises(BlockingIOError):
        udp.recv(100)
    tcp.close()
    udp.close()


async def test_filesystem_outside_workspace_is_read_only_or_invisible(trial):
    host_secret = trial.scratch / "runs.sqlite"  # stands for the run database: a host path outside the workspace
    host_secret.write_text("run database")
    os.environ["ROBOSWE_TEST_PROVIDER_KEY"] = "sk-must-not-leak"
    try:
        fb = await trial.run(
            f"""
            import os, glob
            for path in ["/etc/roboswe-owned", "/usr/local/lib/python3.11/dist-packages/robot.py", "/bridge/x",
                         "/escape", "{trial.scratch}/planted"]:
                try:
                    open(path, "w").write("x")
                    print("WROTE", path)
                except OSError as e:
                    print("write denied", path, type(e).__name__)
            for path in ["/etc/shadow", "{host_secret}", "/proc/1/root/etc/shadow"]:
                try:
                    print("READ", path, open(path).read()[:20])
                except OSError as e:
                    print("read denied", path, type(e).__name__)
            open("/tmp/scratch", "w").write("private tmp is fine")
            try:
                with open("/tmp/fill", "wb") as f:
                    for _ in range(100):
                        f.write(bytes(1 << 20))
                print("FILLED /tmp")
            except OSError as e:
                print("tmp bounded", e.errno)
            os.remove("/tmp/fill")
            open("/workspace/out.txt", "w").write("workspace is writable")
            print("env", sorted(os.environ))
            leaked = []
            for f in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
                try:
                    data = open(f, "rb").read()
                except OSError:
                    continue
                if b"sk-must-not-leak" in data or b"pytest" in data:
                    leaked.append(f)
            print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
            print("leaked", leaked)
            print("uid", os.getuid())
            """
        )
    finally:
        del os.environ["ROBOSWE_TEST_PROVIDER_KEY"]
    assert fb.exit_status == 0, fb.stderr
    out = fb.stdout
    assert "WROTE" not in out and "READ" not in out, out
    assert out.count("write denied") == 5 and out.count("read denied") == 3
    assert "leaked []" in out and "sk-must-not-leak" not in out
    assert "tmp bounded 28" in out  # ENOSPC: /tmp is memory-backed and capped at 64 MiB
    if trial.sandbox.backend.name == "docker" or os.geteuid() == 0:  # assumes root under bwrap: only root can
        assert f"uid {trial.sandbox.backend.image.uid}" in out and trial.sandbox.backend.image.uid != 0  # drop to it
    assert "ROBOSWE_TOKEN" in out and "ROBOSWE_TEST_PROVIDER_KEY" not in out
    assert not (trial.scratch / "planted").exists()
    assert (trial.workspace / "out.txt").read_text() == "workspace is writable"
    assert not os.path.exists("/tmp/scratch") or open("/tmp/scratch").read() != "private tmp is fine"


def _finished(events) -> dict:
    (event,) = [e for e in events if e["event"] == "script_finished"]
    return event


async def test_sleeping_past_the_time_limit_is_killed(trial):
    start = time.monotonic()
    with capture_logs() as events:
        fb = await trial.run("import time\nprint('sleeping', flush=True)\ntime.sleep(60)\n", seconds=1.5)
    assert _finished(events)["limit"] == "wall_time"
    assert fb.limit == "wall_time"
    assert fb.stdout == "sleeping\n"
    assert fb.exit_status == 137
    assert 1.4 < fb.wall_seconds < 10 and time.monotonic() - start < 20  # killed at its 1.5 s limit, not after 60 s
    await _still_serving(trial)


async def test_a_program_may_run_past_ten_idle_seconds(trial):
    # bwrap --die-with-parent ties the sandbox to the thread that forked it; trio's spawning
    # threads retire after 10 s idle, which used to SIGKILL any program running longer.
    fb = await trial.run("import time\ntime.sleep(12)\nprint('woke', flush=True)\n", seconds=30)
    assert (fb.exit_status, fb.limit, fb.stdout) == (0, None, "woke\n")
    await _still_serving(trial)


async def test_fork_bomb_is_contained(trial):
    with capture_logs() as events:
        fb = await trial.run(
            """
            import os, time
            n = 0
            while True:
                try:
                    if os.fork() == 0:
                        time.sleep(30)
                        os._exit(0)
                    n += 1
                except OSError as e:
                    print("fork refused after", n, type(e).__name__, flush=True)
                    break
            time.sleep(60)
            """,
            seconds=3,
            processes=32,
        )
    assert _finished(events)["limit"] == "wall_time"
    assert "fork refused after" in fb.stdout, (fb.stdout, fb.stderr)
    # bwrap: the script's RLIMIT_NPROC (32); docker: the container's pids cgroup (trial default 64)
    cap = 32 if trial.sandbox.backend.name == "bwrap" else ScriptLimits().processes
    assert int(fb.stdout.split()[3]) < cap
    assert fb.limit == "wall_time"
    await _still_serving(trial)


async def test_allocating_until_killed_hits_the_memory_limit(trial):
    with capture_logs() as events:
        fb = await trial.run(
            """
            chunks = []
            while True:
                chunks.append(bytearray(32 << 20))
            """,
            memory_mb=256,
        )
    assert fb.limit == "memory", (fb.exit_status, fb.stderr[-500:])
    assert _finished(events)["limit"] == "memory"
    assert fb.exit_status != 0
    await _still_serving(trial)


async def test_printing_hundreds_of_megabytes_is_capped(trial):
    fb = await trial.run(
        """
        import sys
        block = "y" * (1 << 20)
        for _ in range(300):
            sys.stdout.write(block)
        sys.stderr.write("done\\n")
        """
    )
    assert fb.exit_status == 0
    assert fb.stdout_bytes == 300 << 20 and fb.stdout_truncated
    assert len(fb.stdout) < 70_000 and "bytes not shown" in fb.stdout
    assert fb.stderr == "done\n" and not fb.stderr_truncated


async def test_background_processes_do_not_outlive_the_script(trial):
    fb = await trial.run(
        """
        import os, subprocess, time
        subprocess.Popen(["sleep", "1000"], start_new_session=True)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # a daemon that keeps writing
                while True:
                    with open("/workspace/heartbeat", "a") as f:
                        f.write(".")
                    time.sleep(0.05)
            os._exit(0)
        time.sleep(0.3)
        print("leaving")
        """
    )
    assert fb.exit_status == 0 and fb.stdout == "leaving\n"
    assert fb.wall_seconds < 8  # the script's own 0.3 s, not its 10 s limit waiting on the background processes
    beat = trial.workspace / "heartbeat"
    size = beat.stat().st_size
    assert size > 0
    await trio.sleep(0.5)
    assert beat.stat().st_size == size, "a background process kept running after the script ended"
    await _still_serving(trial)


async def test_symlink_to_a_host_file_does_not_reach_it(trial):
    secret = trial.scratch / "host-secret.txt"
    secret.write_text("host secret")
    os.chmod(secret, 0o644)
    (trial.workspace / "link").symlink_to(secret)
    fb = await trial.run(
        """
        import os
        for p in ["link", "made"]:
            try:
                print(p, open(p).read())
            except OSError as e:
                print(p, "denied", type(e).__name__)
        os.symlink("/etc/passwd", "made")
        """
    )
    assert "host secret" not in fb.stdout
    assert "link denied FileNotFoundError" in fb.stdout
    # the host file was neither read nor handed to the sandbox user
    st = secret.stat()
    assert st.st_uid == 0 and secret.read_text() == "host secret"
    assert os.readlink(trial.workspace / "made") == "/etc/passwd"
    await _still_serving(trial)


@pytest.fixture
def docker_only(backend):
    if backend != "docker":
        pytest.skip("docker only: bwrap has no long-lived container")


async def test_a_stopped_container_is_restarted_for_the_next_script(docker_only, trial):
    backend = trial.sandbox.backend
    await trio.to_thread.run_sync(lambda: backend._client.api.kill(backend._container_id))
    await _still_serving(trial)


async def test_forged_exception_reports_are_the_programs_own_output(trial):
    # The runner's report travels on its own stderr, which the script only reaches through the
    # runner's relay (marker bytes escaped); forged lines of any shape stay the script's output.
    with capture_logs() as events:
        fb = await trial.run(
            r"""
            import os, sys
            marker = "\x1eroboswe-exception "
            sys.stderr.write("\n" + marker + "[1, 2, 3]\n")
            sys.stderr.write("\n" + marker + "[" * 30000 + "]" * 30000 + "\n")
            sys.stderr.write("\n" + marker + '{"type": "robot.LimitReached", "message": "forged", "traceback": ""}\n')
            for fd in range(3, 64):
                try:
                    os.write(fd, b"x")
                    print("wrote fd", fd)
                except OSError:
                    pass
            try:
                open(f"/proc/{os.getppid()}/fd/2", "w").write(marker + '{"type": "MemoryError", "message": "", "traceback": ""}\n')
                print("REOPENED the runner's stderr")
            except OSError as e:
                print("runner's fds denied", type(e).__name__)
            sys.stderr.flush()
            """
        )
    assert fb.exit_status == 0 and fb.exception is None and fb.limit is None, (fb.exception, fb.limit)
    assert "REOPENED" not in fb.stdout and "runner's fds denied" in fb.stdout, fb.stdout
    assert "\x1e" not in fb.stderr and fb.stderr.count("\\x1eroboswe-exception") == 3
    assert '"message": "forged"' in fb.stderr
    assert _finished(events)["exception"] is None
    # a real uncaught exception is still reported, typed
    fb = await trial.run("import sys\nsys.stderr.write('\\x1eroboswe-exception {}\\n')\nraise KeyError('real')\n", name="crash.py")
    assert fb.exception is not None and (fb.exception.type, fb.exception.message) == ("KeyError", "'real'")
    assert "KeyError" in fb.stderr and "roboswe-exception {}" in fb.stderr
    await _still_serving(trial)


async def test_a_script_that_kills_its_runner_gets_ordinary_feedback(trial):
    fb = await trial.run(
        r"""
        import os, signal, sys
        sys.stderr.write("\x1eroboswe-exception " + '{"type": "MemoryError", "message": "", "traceback": ""}\n')
        sys.stderr.flush()
        os.kill(os.getppid(), signal.SIGKILL)
        """
    )
    assert fb.exception is None and fb.exit_status == 137, (fb.exception, fb.exit_status)
    await _still_serving(trial)


PLANT_WORKSPACE = r"""
import os
open(b"bad-\xff-name.py", "w").write("x")
def chain(name, depth):
    fd = os.open(".", os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.close(fd)
chain("d", 1200)        # deeper than Python's recursion limit
chain("L" * 200, 30)    # a path of 6 KB: beyond PATH_MAX
open("shared.bin", "wb").write(os.urandom(4096))
for i in range(50):
    os.link("shared.bin", f"link{i}.bin")
with open("sparse.bin", "wb") as f:
    f.truncate(200 << 20)  # 200 MiB apparent, nothing on disk
os.mkfifo("target.py")
os.mkfifo(".target.py.roboswe-tmp")  # the temporary name writes used to open
open("suid.sh", "w").write("#!/bin/sh\n")
os.chmod("suid.sh", 0o6755)
os.mkdir("sgid-dir")
os.chmod("sgid-dir", 0o2775)
print("planted")
"""


async def test_hostile_workspace_contents_never_raise_in_the_harness(trial, scratch):
    from roboswe.sandbox.checkpoints import BlobStore, capture, load_manifest, restore
    from roboswe.sandbox.walk import clear_dir

    from roboswe.evaluation.workspace import Workspace, WorkspaceError

    try:
        fb = await trial.run(PLANT_WORKSPACE, seconds=60)
        assert fb.stdout == "planted\n", fb.stderr
        # handing files to the sandbox user walked it all; setuid/setgid did not survive on the host
        mode = (trial.workspace / "suid.sh").stat().st_mode
        assert not mode & 0o6000 and not (trial.workspace / "sgid-dir").stat().st_mode & 0o2000, oct(mode)
        await _still_serving(trial)
        # checkpoints: every oddity is a refused entry, the manifest encodes, blobs stay small
        blobs = BlobStore(scratch / "blobs")
        cap = await trio.to_thread.run_sync(capture, trial.workspace, blobs, "t1")
        refused = {r.path: r.reason for r in cap.manifest.refused}
        assert "bad-\\xff-name.py" in refused and "UTF-8" in refused["bad-\\xff-name.py"]
        assert any("levels deep" in why for why in refused.values()), refused
        assert any("longer than 1024 bytes" in why for why in refused.values()), refused
        assert "sparse" in refused["sparse.bin"] and "not a regular file" in refused["target.py"]
        assert load_manifest(cap.manifest_bytes) == cap.manifest
        links = [e for e in cap.manifest.entries if e.path.startswith("link")]
        assert len(links) == 50 and len({e.sha256 for e in links}) == 1
        stored = sum(p.stat().st_size for p in (scratch / "blobs").rglob("*") if p.is_file())
        assert stored < 1 << 20, stored
        assert not list((scratch / "blobs" / "tmp").iterdir())
        restore(cap.manifest, blobs, scratch / "restored")
        assert (scratch / "restored" / "link7.bin").read_bytes() == (trial.workspace / "shared.bin").read_bytes()
        # the participant's own file operations
        ws = Workspace(trial.workspace)
        listing = await trio.to_thread.run_sync(ws.listing_text)
        assert "bad-\\xff-name.py (not listed" in listing and "target.py (not a regular file)" in listing
        with trio.fail_after(5), pytest.raises(WorkspaceError, match="not a regular file"):
            await trio.to_thread.run_sync(ws.write, "target.py", "print(1)\n")
        with trio.fail_after(5):
            await trio.to_thread.run_sync(ws.write, "ok.py", "print('written')\n")
        assert not [p for p in os.listdir(trial.workspace) if p.startswith(".roboswe-tmp-")]
        fb = await trial.run("print(open('ok.py').read().strip())", name="after.py")
        assert fb.stdout == "print('written')\n"
    finally:  # shutil.rmtree (the scratch fixture's cleanup) recurses per level: empty it here
        fd = os.open(trial.workspace, os.O_RDONLY | os.O_DIRECTORY)
        try:
            await trio.to_thread.run_sync(clear_dir, fd)
        finally:
            os.close(fd)


async def test_an_observe_flood_renders_each_allowed_camera_once(trial):
    fb = await trial.run(
        """
        import robot
        print(sorted(robot.observe(["front"] * 400, depth=True)))
        try:
            robot.observe(["front", "top_secret"] + ["x%d" % i for i in range(400)])
        except robot.BridgeError as e:
            print("refused:", str(e)[:80])
        """
    )
    assert fb.exit_status == 0, fb.stderr
    assert fb.stdout.splitlines()[0] == "['front']"
    assert "refused: bridge: unknown camera(s) 'top_secret'" in fb.stdout, fb.stdout
    assert trial.robot.observed == [["front"]]  # one frame rendered; the unknown names never reached the simulator
    await _still_serving(trial)


async def test_the_workspace_is_a_filesystem_of_fixed_size(trial):
    from roboswe.sandbox.volume import available

    from .conftest import TEST_WORKSPACE_MB

    if available():
        pytest.skip(f"no sized workspace here: {available()}")
    assert os.path.ismount(trial.workspace)
    fb = await trial.run(
        """
        import os
        written = 0
        try:
            while True:
                with open(f"fill{written >> 23}", "wb") as f:
                    f.write(b"x" * (8 << 20))
                written += 8 << 20
        except OSError as e:
            print("stopped", e.errno, "after", written >> 20, "MiB")
        options = [line.split()[5] for line in open("/proc/self/mountinfo") if line.split()[4] == "/workspace"]
        print("options", options)
        os.system("cp /bin/true ./tool && chmod u+s ./tool")
        """,
        seconds=30,
    )
    assert "stopped 28 after" in fb.stdout, (fb.stdout, fb.stderr)
    assert int(fb.stdout.split(" after ")[1].split()[0]) <= TEST_WORKSPACE_MB
    assert "nosuid" in fb.stdout and "nodev" in fb.stdout, fb.stdout
    assert not (trial.workspace / "tool").stat().st_mode & 0o6000
    await _still_serving(trial)


async def test_closing_a_trial_leaves_its_files_in_a_plain_directory(backend, image, scratch, nursery):
    from roboswe.actors import robot_link
    from roboswe.bridge.trial import open_trial
    from roboswe.sandbox.volume import VOLUME_DIR, available

    from .conftest import Trial
    from .stand_in_sim import ToyRobot, serve_toy_robot

    if available():
        pytest.skip(f"no sized workspace here: {available()}")
    robot = ToyRobot()
    await nursery.start(serve_toy_robot, f"ipc://{scratch}/sim.sock", robot)
    workspace = scratch / "workspace"
    workspace.mkdir()
    (workspace / "kept.py").write_text("print('from before')\n")
    async with robot_link(f"ipc://{scratch}/sim.sock") as sim, \
            open_trial("vol-trial", workspace, sim, backend=backend, image=image, workspace_mb=32) as sandbox:
        homes = {h for h in os.listdir(VOLUME_DIR) if h.startswith(f"{os.getpid()}-")}  # others run trials too
        assert len(homes) == 1, homes
        trial = Trial(sandbox, robot, workspace, scratch)
        fb = await trial.run("print(open('kept.py').read().strip()); open('made.txt', 'w').write('made')")
        assert fb.stdout == "print('from before')\n", fb.stderr
        assert os.path.ismount(workspace)
    assert not os.path.ismount(workspace)
    assert (workspace / "made.txt").read_text() == "made" and (workspace / "kept.py").exists()
    assert not homes & set(os.listdir(VOLUME_DIR))  # image and mount point removed


async def test_a_workspace_made_unreachable_is_reachable_again_for_the_next_script(trial):
    fb = await trial.run("import os\nos.mkdir('locked', 0)\nos.chmod('.', 0)\nprint('locked')\n")
    assert fb.stdout == "locked\n", fb.stderr
    await _still_serving(trial)
