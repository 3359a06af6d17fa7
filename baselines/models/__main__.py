"""The encoding job's child process: ``python -m baselines.models REQUEST_FD REPLY_FD [PARENT]``."""

import ctypes
import os
import signal
import sys

from baselines.models.job import child_main

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """Ask the kernel to kill this process when its parent dies (Linux); exit now if it has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's budget still stops the job
        return
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)


if __name__ == "__main__":
    if len(sys.argv) > 3:
        die_with_parent(int(sys.argv[3]))
    child_main(int(sys.argv[1]), int(sys.argv[2]))
