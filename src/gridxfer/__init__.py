"""gridxfer: bulk transfer campaigns, host tuning and monitoring for grid sites."""

__version__ = "0.1.0"
