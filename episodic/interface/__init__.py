"""What a learner and a runner share, whichever side of the bridge they are on: the commands
(commands), the flags, kinds and the reply (vocabulary), the learner's calls (sender), a robot's
description (robot), the per-step log columns (columns) and minimum-jerk segments (trajectory)."""
