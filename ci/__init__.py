"""CI tooling: the pinned upstream reference data (lock, fetch) and the preview role examples."""
