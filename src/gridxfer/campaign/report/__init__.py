"""Reports from a journal: summaries, endpoint shares, time bins."""
