"""``python -m scripts.reliability``: the command line of ``scripts.reliability.cli``."""

from scripts.reliability.cli import main

if __name__ == "__main__":
    main()
