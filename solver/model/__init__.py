"""The performance and power model: GPU and architecture catalog, throughput and power
predictions, and the configurations (GPU type x parallelism x clock) a job may run in."""
