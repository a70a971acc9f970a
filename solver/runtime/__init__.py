"""Where work runs: worker processes, local pools and Ray, the cores and memory a process may
use, and the accounting of workers that died. Nothing here knows what a solve is."""
