"""Runs one authored script inside the sandbox and reports an uncaught exception in a form the
bridge can parse (installed in the image as ``roboswe_runner``; stdlib only).

The report is the last stderr line, after the usual traceback. The script could forge it,
but it would only mislead its own feedback.
"""

import json
import os
import runpy
import sys
import traceback

MARKER = "\x1eroboswe-exception "
_ROBOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "robot.py")


def _user_frames(tb):
    # Drop the runner's and runpy's frames so the traceback starts in authored code.
    skip = (__file__, runpy.__file__, "<frozen runpy>")
    while tb is not None and tb.tb_frame.f_code.co_filename in skip:
        tb = tb.tb_next
    return tb


def main() -> None:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python3 -m roboswe_runner SCRIPT.py\n")
        sys.exit(2)
    script = sys.argv[1]
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - everything the script raised is reported
        te = traceback.TracebackException(type(e), e, _user_frames(e.__traceback__))
        # The robot module's own frames say nothing to the author: end at the robot.* call.
        while len(te.stack) > 1 and te.stack[-1].filename == _ROBOT:
            te.stack = traceback.StackSummary.from_list(list(te.stack)[:-1])
        text = "".join(te.format())
        name = type(e).__qualname__
        module = type(e).__module__
        if module not in ("builtins", "__main__"):
            name = f"{module}.{name}"
        try:
            message = str(e)
        except Exception:  # noqa: BLE001 - a broken __str__ must not hide the report
            message = "<unprintable>"
        sys.stdout.flush()
        sys.stderr.write(text)
        sys.stderr.write("\n" + MARKER + json.dumps({"type": name, "message": message, "traceback": text}) + "\n")
        sys.stderr.flush()
        os._exit(1)  # atexit handlers of the script are not ours to run after a crash


if __name__ == "__main__":
    main()
