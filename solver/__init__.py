"""DSFRO: joint placement, parallelism and SM-clock solver for training clusters."""

__version__ = "0.1.0"
