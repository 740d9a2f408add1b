"""Robot models: one folder per robot with its MJCF model and ``robot.toml`` settings."""
