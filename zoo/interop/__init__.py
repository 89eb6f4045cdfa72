"""Weight converters between zoo models and other implementations (optional dependencies)."""
