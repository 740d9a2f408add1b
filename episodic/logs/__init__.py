"""Run logs: one HDF5 file per run, an episode a group (the layout: episodic.logs.layout), written
by episodic.logs.writer.RunLog and read with the functions below, also while a runner writes it
(``open_log`` opens one as plain h5py does, waiting while its writer holds it)."""
from episodic.logs.reader import (
    StoredEpisode,
    being_written,
    episode_problem,
    iter_episodes,
    open_log,
    partial_episodes,
    read_episodes,
    read_metadata,
    read_summary,
)
from episodic.logs.writer import LogError, RunLog

__all__ = ["LogError", "RunLog", "StoredEpisode", "being_written", "episode_problem", "iter_episodes", "open_log",
           "partial_episodes", "read_episodes", "read_metadata", "read_summary"]
