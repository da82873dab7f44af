"""A reader worker's process: ``python -m core.backends.worker_process READ_FD WRITE_FD``.

Kept apart from :mod:`core.backends.workers`, which the package imports: running that module
itself with ``-m`` would import it twice (runpy warns on stderr, where a user reads the run).
"""

import sys

from core.backends.workers import serve

if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
