#!/usr/bin/env bash
# One prepared run on a lent GPU machine (16-core H200): rendering device, physics, and, where the
# machine has what they need, the simulator, sandbox and series benchmarks. Writes JSON and logs
# under $OUT; each part has its own time limit (about 6 minutes in all) and a part that cannot
# run records why instead of failing the whole run.
#
# Prepare here (this machine), once:
#   .venv/bin/python benchmarks/device.py prepare --out .devscene      # the Lift scene + 200 states
#   echo /.devscene/ >> .git/info/exclude; echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     mujoco==3.3.1 msgspec==0.23.0 structlog==26.1.0 PyOpenGL==3.1.10 pyzmq==27.3.0 trio==0.35.0 \
#     outcome==1.3.0.post0 sniffio==1.3.1 sortedcontainers==2.4.0
#   (robosuite/praxis-robosuite is ~126 MB installed: over the 64 MiB a call carries, so the robosuite
#   benchmarks below run only on a machine that already has it.)
# Then the lead runs, with carry [".devscene", ".whl"] and timeout_s 420:
#   bash benchmarks/device_run.sh
set -u
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
export OUT
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 MUJOCO_GL=egl PYOPENGL_PLATFORM=egl
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
note() { echo "$*" | tee -a "$OUT/device_run.log"; }
note "device_run $(date -u +%FT%TZ) on $(nproc) CPUs; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"

if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || note "wheel install failed"
fi
# roboswe imports as roboswe.* from this checkout without installing (pyproject's package-dir as links).
mkdir -p /tmp/rs/roboswe
for f in roboswe/*; do ln -sfn "$ROOT/$f" "/tmp/rs/roboswe/$(basename "$f")"; done
for d in protocol actors bridge sim sandbox; do ln -sfn "$ROOT/$d" "/tmp/rs/roboswe/$d"; done
export PYTHONPATH=/tmp/rs${PYTHONPATH:+:$PYTHONPATH}

# 1. Which device renders, chosen explicitly (sim/render.py), and the frame cost there (~20 s).
timeout 60 $PY - > "$OUT/render_device.log" 2>&1 <<'EOF'
import gzip, json, os, time, mujoco, numpy as np
from roboswe.sim import render
chosen = render.choose_egl_device()
with gzip.open(".devscene/scene.mjb.gz") as f:
    raw = f.read()
open("/tmp/scene.mjb", "wb").write(raw)
model = mujoco.MjModel.from_binary_path("/tmp/scene.mjb")
r = render.SceneRenderer(model, 256, 256)
states = np.load(".devscene/states.npz")
cam = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, 0)
times = []
for i in range(min(50, len(states["qpos"]))):
    r.load_state({k: states[k][i] if k in states.files else getattr(r._data, k) for k in ("qpos", "qvel", "act", "mocap_pos", "mocap_quat")})
    t0 = time.perf_counter(); r.render(cam, 256, 256, depth=True, calibration=False); times.append(time.perf_counter() - t0)
open(os.path.join(os.environ["OUT"], "render_device.json"), "w").write(json.dumps({"egl_device_chosen": chosen, "MUJOCO_EGL_DEVICE_ID": os.environ.get("MUJOCO_EGL_DEVICE_ID"),
                  "renderer": render.device(), "gpu_present": render.gpu_present(),
                  "rgbd_256_ms_median": 1000 * sorted(times)[len(times) // 2]}, indent=2))
r.close()
EOF
note "render device: $(tr -d '\n' < "$OUT/render_device.json" 2>/dev/null | head -c 400) $(tail -n 2 "$OUT/render_device.log")"

# 2. Rendering from recorded states, raw mj_step, physics scaling over processes (benchmarks/device.py, ~2 min).
timeout 150 $PY benchmarks/device.py measure --scene .devscene --frames 60 --procs 1,2,4,8,16 --json "$OUT/device.json" \
  > "$OUT/device.txt" 2>&1 || note "device.py measure failed or timed out (rc $?)"

# 3. The robosuite benchmarks, where robosuite and the sandbox are there (each capped).
if $PY -c "import robosuite" 2>/dev/null; then
  timeout 100 $PY benchmarks/sim_step.py --steps 100 --rounds 3 --json "$OUT/sim_step.json" > "$OUT/sim_step.txt" 2>&1 \
    || note "sim_step.py failed or timed out (rc $?)"
  if command -v bwrap >/dev/null || docker info >/dev/null 2>&1; then
    timeout 100 $PY benchmarks/sandbox.py --rounds 3 --starts 5 --json "$OUT/sandbox.json" > "$OUT/sandbox.txt" 2>&1 \
      || note "sandbox.py failed or timed out (rc $?)"
    timeout 100 $PY benchmarks/series.py --trials 3 --json > "$OUT/series.json" 2> "$OUT/series.err" \
      || note "series.py failed or timed out (rc $?)"
  else
    note "sandbox and series benchmarks skipped: neither bwrap nor a docker daemon on this machine"
  fi
else
  note "sim_step, sandbox and series benchmarks skipped: robosuite is not importable here (too large to carry)"
fi
note "done $(date -u +%FT%TZ)"
