"""The application core every door shares: the one solve pipeline, conversion between the wire
and the domain, validation, limits, durations and names, and operator profiles."""
