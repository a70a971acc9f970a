"""``python -m scripts.fuzz``: the command line of ``scripts.fuzz.cli``."""

import sys

from scripts.fuzz.cli import main

if __name__ == "__main__":
    sys.exit(main())
