"""The `episodic` command (main) and its end-to-end demo (demo)."""
