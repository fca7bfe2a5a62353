"""``python -m queuesgd`` runs the command line."""

import sys

from queuesgd.cli import main

if __name__ == "__main__":
    sys.exit(main())
