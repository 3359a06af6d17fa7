"""`python -m evaluation`: see evaluation.cli."""

import os
import sys

# The scorer's matrix products are (resamples x pairs) @ (pairs x 6): BLAS threads cost more to
# start and wake than they save, and on a busy machine they spin against each other (a 5-file
# release: about a third of the command's CPU time). Set before numpy loads; the user's wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from evaluation.cli import main  # numpy loads here, after the setting above

if __name__ == "__main__":
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # output piped into `head` and the like: stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = 0
    sys.exit(status)
