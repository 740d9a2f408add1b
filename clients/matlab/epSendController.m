function [reward, state, flag, info, success, episodeReturn] = epSendController(gains, waitTime, trajIdx, maxCommands, stateBuffer, timeOut, mode)
%EPSENDCONTROLLER  Send a gain set as segment trajIdx (1..maxCommands) of the running episode.
%   [reward, state, flag] = epSendController(gains, waitTime, trajIdx, maxCommands, stateBuffer, timeOut)
%   [reward, state, flag, info] = epSendController(..., timeOut, mode)
%   [reward, state, flag, info, success, episodeReturn] = epSendController(...)
%
%   gains        n_dofs x 3 [kp kd ki] or n_dofs x 2 [kp kd] (ki = 0), one row per joint,
%                in N m/rad, N m s/rad, N m/(rad s); or a struct with fields kp, kd and
%                optionally ki and mode. The gains replace the robot's for the following
%                segments of this episode (every episode starts with the robot's defaults).
%   waitTime     s the current posture is held with the new gains (0..60)
%   trajIdx      the segment index, 1..maxCommands (the episode is started by
%                epSendTrajectory with trajIdx 0)
%   maxCommands  as given at the start
%   stateBuffer  task gains for the task's own feedback law ([] = none; see `episodic tasks`)
%   timeOut      s to wait for the reply ([] or left out = 30 s; stateBuffer may be left out too)
%   mode         the feedforward part of the control law: 'none' (PD only),
%                'gravity_compensation' (default), 'feedforward' (inverse dynamics of the
%                desired state) or 'inverse_dynamics' (at the measured state), or 0..3
%   Outputs as for epSendTrajectory.
if nargin < 4
  error('episodic:argument', ['epSendController: usage: epSendController(gains, waitTime, trajIdx, ' ...
        'maxCommands [, stateBuffer, timeOut, mode])']);
end
if nargin < 5
  stateBuffer = [];
end
if nargin < 6
  timeOut = [];
end
if nargin < 7
  mode = [];
end
if isnumeric(gains) || islogical(gains)
  gains = double(gains);
end
if isnumeric(stateBuffer) || islogical(stateBuffer)
  stateBuffer = double(stateBuffer);
end
[reward, state, flag, info, success, episodeReturn] = episodic_call('gains', gains, mode, stateBuffer, waitTime, ...
                                                                   trajIdx, maxCommands, timeOut);
end
