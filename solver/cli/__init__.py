"""The command-line edge: ``dsfro`` and its commands."""
