"""``python -m jupyter_to_job.service``: run the job service until SIGTERM."""

import sys

from .app import main

if __name__ == "__main__":
    sys.exit(main())
