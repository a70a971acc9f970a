"""The full model: one backend-neutral formulation and the exact backends that solve it."""
