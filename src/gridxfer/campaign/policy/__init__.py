"""Campaign policies: destination selection, exclusions, free space, concurrency."""
