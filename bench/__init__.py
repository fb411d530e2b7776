"""gridxfer benchmarks against real peers. Run all with `make bench` (python -m bench)."""
