function [state, flag] = SLInitEpisode(initState, maxCommands)
%SLINITEPISODE  SL's start of an episode (command 1 of maxCommands), over an episodic channel.
%   [state, flag] = SLInitEpisode(initState)               maxCommands 2: the start and one motion
%   [state, flag] = SLInitEpisode(initState, maxCommands)
%
%   initState  SL's context, up to 10 values laid out as the task's SL map says (e.g. ball-on-a-beam
%              [x0 xd0] m, m/s; tetherball [x y z] m), zero-padded; [] for the task's default
%   state      20 x 1: state(1) 0 (a start earns nothing), then the task state at the start
%   flag       1 answered, -1 no answer within 20 s (send it again)
%   The robot goes to the task's start posture. The channel is $EPISODIC_CHANNEL, else 'default'.
if nargin < 2
  maxCommands = 2;
end
[state, flag] = SLSendTrajectoryMex(1, maxCommands, 0.0, zeros(1, SLGetInfoMex()), initState, 20);
end
