function [reward, state, flag, info, success, episodeReturn] = epReset(timeOut)
%EPRESET  Abort the running episode (its flag becomes ABORTED_BY_LEARNER, 6).
%   [reward, state, flag, info, success, episodeReturn] = epReset(timeOut)   timeOut s ([] or omitted = 30 s)
%   Outputs as for epSendTrajectory (info.posture: the posture the robot holds; reward the charge
%   for the part of the episode left out, episodeReturn the aborted episode's return).
if nargin < 1
  timeOut = [];
end
[reward, state, flag, info, success, episodeReturn] = episodic_call('reset', timeOut);
end
