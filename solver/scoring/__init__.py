"""Plans and their worth: the objective, the independent checker, plan evaluation and the
turning of configuration choices into plans."""
