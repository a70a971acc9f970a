"""The solver core: one Solver, its settings, its deadline and its incumbent."""
