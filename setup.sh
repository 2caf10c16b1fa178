#!/usr/bin/env bash
# Set up roboswe on a fresh Debian/Ubuntu machine: system packages, then a virtualenv at .venv.
# Safe to re-run: it installs only what is missing. One line per step; what apt, pip and the
# image build print goes to .cache/setup.log, whose tail and path are shown when a step fails.
set -euo pipefail
cd "$(dirname "$0")"

mkdir -p .cache
LOG="$PWD/.cache/setup.log"
: >"$LOG"

say() { echo "setup.sh: $*"; }

# step DESCRIPTION COMMAND...: run COMMAND with its output in the log; on failure show where it went.
step() {
    local what="$1"
    shift
    say "$what"
    echo "==> $what: $*" >>"$LOG"
    local code=0
    "$@" >>"$LOG" 2>&1 || code=$?
    if ((code)); then
        echo "setup.sh: failed ($what, exit $code); the last lines of $LOG:" >&2
        tail -n 25 "$LOG" | sed 's/^/    /' >&2
        exit "$code"
    fi
}

# System packages: bubblewrap/docker for sandboxes, debootstrap for the sandbox image,
# chromium for the report viewer tests, Mesa EGL for offscreen MuJoCo rendering.
APT_PACKAGES=(bubblewrap docker.io debootstrap chromium chromium-driver libegl1 libgl1 libegl-mesa0)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    SUDO=()
    [ "$(id -u)" -eq 0 ] || SUDO=(sudo)
    step "system packages: updating apt's lists" "${SUDO[@]}" apt-get update -qq
    step "system packages: installing ${missing[*]}" \
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    say "system packages: all present (${APT_PACKAGES[*]})"
fi

# Python 3.11 or 3.12 (robosuite 1.5.2 and mujoco 3.3 wheels).
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
    for candidate in python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 13)))' 2>/dev/null; then
            PYTHON="$candidate"
            break
        fi
    done
fi
if [ -z "$PYTHON" ]; then
    echo "setup.sh: need Python 3.11 or 3.12 (set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv || { echo "setup.sh: '$PYTHON -m venv' failed; install python3-venv" >&2; exit 1; }
    say "virtualenv: created .venv with $("$PYTHON" --version 2>&1)"
else
    say "virtualenv: .venv ($(.venv/bin/python --version 2>&1))"
fi
step "python packages: upgrading pip" .venv/bin/python -m pip install -q --upgrade pip
# PyPI's robosuite (an older checkout's pin) and praxis-robosuite both own the `robosuite` import
# package: remove the former before installing, or its files and the new ones get mixed.
if .venv/bin/python -m pip show -q robosuite >/dev/null 2>&1; then
    step "python packages: removing PyPI's robosuite (praxis-robosuite replaces it)" \
        .venv/bin/python -m pip uninstall -q -y robosuite mink
    .venv/bin/python -m pip uninstall -q -y praxis-robosuite >>"$LOG" 2>&1 || true  # reinstalled whole below
fi
step "python packages: installing roboswe[test] (editable) and its pins into .venv" \
    .venv/bin/python -m pip install -q -e '.[test]'

# Docker engine for the docker sandbox backend (bubblewrap is used when none answers).
# Networkless containers need no bridge or iptables. ROBOSWE_NO_DOCKERD=1 skips this.
if [ -z "${ROBOSWE_NO_DOCKERD:-}" ] && command -v dockerd >/dev/null && [ "$(id -u)" -eq 0 ] \
        && ! docker info >/dev/null 2>&1; then
    for driver in overlay2 vfs; do
        say "docker: starting dockerd (storage $driver, log /tmp/roboswe-dockerd.log)"
        setsid dockerd --iptables=false --bridge=none --storage-driver="$driver" \
            >/tmp/roboswe-dockerd.log 2>&1 < /dev/null &
        for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
        docker info >/dev/null 2>&1 && break
        echo "setup.sh: dockerd did not start with $driver" >&2
        kill $! 2>/dev/null || true
    done
fi

# The sandbox image: a debootstrapped Debian rootfs shared by both backends (imported into
# Docker when it answers). The first build takes 1-2 min; later runs reuse it in seconds.
# debootstrap needs root.
if [ "$(id -u)" -eq 0 ]; then
    step "sandbox image: building (the first build debootstraps Debian: 1-2 min)" .venv/bin/roboswe images build
    say "sandbox image: $(.venv/bin/roboswe images show | sed -n 's/^digest *//p')"
    step "artifact image: building (RLE-Bench artifacts: the sandbox image plus Debian's SciPy and OpenCV; first build ~12 min)" \
        .venv/bin/roboswe rle image build
elif ! .venv/bin/roboswe images show >/dev/null 2>&1; then
    echo "setup.sh: no sandbox image yet; build it once as root: sudo .venv/bin/roboswe images build" >&2
fi
say "ready (.venv, sandbox image; the steps' output is in $LOG)"
