"""gfal2 movers (python3-gfal2), in process and in a child process."""
