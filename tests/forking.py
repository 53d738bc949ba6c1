"""Running a check in a forked child, for the tests of fork safety."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def child_status(child: Callable[[], bool], seconds: float) -> int | str:
    """Fork; the child runs `child()` and exits 0 when it returns True, 4 when False, 3
    when it raises. The child's exit status comes back, or "hung" (after killing it)
    when it takes longer than `seconds`."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        code = 3
        try:
            code = 0 if child() else 4
        finally:
            os._exit(code)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"
