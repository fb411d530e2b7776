"""Accounting: per-endpoint meters and campaign statistics snapshots."""
