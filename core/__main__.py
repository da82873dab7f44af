"""``python -m core``: the command-line entry point."""

import sys

from core.cli import main

sys.exit(main())
