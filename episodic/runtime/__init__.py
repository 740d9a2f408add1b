"""The runner: the episode state machine and its parts (machine, start, motion_clock, recorder),
the backends that run a segment on MuJoCo or a robot driver (backend, simulation), SL's control
law (control), the compiled scene (scene), wall-clock pacing and scheduling, and the Runner that
ties them to a task and a log (runner)."""
