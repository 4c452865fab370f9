"""posixlab's results in other projects' formats, and their data in posixlab's metrics (``dove``: DOVE's schema)."""
