function [reward, state, flag] = SLSendTrajectory(trajectory, waitTime, numCommand, maxCommands, stateBuffer, timeOut)
%SLSENDTRAJECTORY  SL's motion command (after SLInitEpisode), over an episodic channel.
%   [reward, state, flag] = SLSendTrajectory(trajectory)    command 2 of 2, no wait, 10 s timeout
%   [reward, state, flag] = SLSendTrajectory(trajectory, waitTime, numCommand, maxCommands, stateBuffer, timeOut)
%
%   trajectory   steps x n_dofs desired joint positions, rad, one row per control step (500 Hz on
%                the WAM); its first row within the robot's max_start_jump of the posture held
%   waitTime     s the last posture is held afterwards
%   numCommand   2..maxCommands (1 is SLInitEpisode's start)
%   reward       state(1) when flag is 1, else -Inf
%   state        20 x 1: state(1) the command's reward, then the task state after it
%   flag         1 answered, -1 no answer within timeOut s (default 10)
if nargin == 1
  waitTime = 0.0;
  numCommand = 2;
  maxCommands = 2;
  stateBuffer = [];
end
if nargin < 6
  timeOut = 10;
end
[state, flag] = SLSendTrajectoryMex(numCommand, maxCommands, waitTime, trajectory, stateBuffer, timeOut);
if flag == 1
  reward = state(1);
else
  reward = -Inf;
end
end
