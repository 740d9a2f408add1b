"""episodic: run robot-arm episodes one command at a time for a learner in another process."""
__version__ = "0.1.0"
