"""The campaign journal (SQLite): its store and the read side (status, list)."""
