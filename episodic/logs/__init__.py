"""Run logs: one HDF5 file per run, an episode a group (the layout: episodic.logs.layout), written
by episodic.logs.writer.RunLog and read with the functions below."""
from episodic.logs.reader import (
    StoredEpisode,
    episode_problem,
    iter_episodes,
    partial_episodes,
    read_episodes,
    read_metadata,
    read_summary,
)
from episodic.logs.writer import LogError, RunLog

__all__ = ["LogError", "RunLog", "StoredEpisode", "episode_problem", "iter_episodes", "partial_episodes",
           "read_episodes", "read_metadata", "read_summary"]
