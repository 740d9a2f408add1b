function [reward, state, flag, info, success, episodeReturn] = SLReset(timeOut)
%SLRESET  Abort the running episode (its flag becomes ABORTED_BY_LEARNER, 6).
%   [reward, state, flag, info, success, episodeReturn] = SLReset(timeOut)   timeOut s ([] or omitted = 30 s)
%   Outputs as for SLSendTrajectory (info.posture: the posture the robot holds; reward the charge
%   for the part of the episode left out, episodeReturn the aborted episode's return).
if nargin < 1
  timeOut = [];
end
[reward, state, flag, info, success, episodeReturn] = episodic_call('reset', timeOut);
end
