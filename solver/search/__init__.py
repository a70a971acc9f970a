"""Fast search and bounds: the heuristic and its placement, the aggregated LP bound and its
Lagrangian dual, and decomposition of large snapshots with the executors that run its parts."""
