"""The campaign engine: the dispatcher loop, its jobs, workers, slots and watchdog."""
