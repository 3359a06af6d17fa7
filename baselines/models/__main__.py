"""The encoding job's child process: ``python -m baselines.models REQUEST_FD REPLY_FD``."""

import sys

from baselines.models.job import child_main

if __name__ == "__main__":
    child_main(int(sys.argv[1]), int(sys.argv[2]))
