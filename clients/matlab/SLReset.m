function [reward, state, flag, info] = SLReset(timeOut)
%SLRESET  Abort the running episode (its flag becomes ABORTED_BY_LEARNER, 6).
%   [reward, state, flag, info] = SLReset(timeOut)   timeOut s ([] or omitted = 30 s)
%   Outputs as for SLSendTrajectory (info.posture: the posture the robot holds).
if nargin < 1
  timeOut = [];
end
[reward, state, flag, info] = episodic_call('reset', timeOut);
end
