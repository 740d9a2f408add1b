"""Tools over runners and logs: batches of episodes on threads, processes or a cluster (batch),
replay, rendering, plotting, export to MRDPLOT and robomimic, a served runner in a subprocess
(served) and progress bars."""
