"""The campaign file: schema, validation, and the expansion of its sources."""
