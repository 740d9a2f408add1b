function [reward, state, flag] = SLSendController(parameters)
%SLSENDCONTROLLER  SL's controller command (command 2 of 2, after SLInitEpisode), over an episodic channel.
%   [reward, state, flag] = SLSendController(parameters)
%
%   parameters  the gains of the task's own controller, up to 10 values as the task's SL map says
%               (e.g. ball-on-a-beam [k_x k_v] rad/m, rad s/m), zero-padded
%   The runner runs the task's controller for the task's own duration (its SL map), the joints on the
%   robot's own gains.
%   reward      state(1) when flag is 1, else -Inf
%   state       20 x 1: state(1) the command's reward, state(2) the control steps it ran, then the
%               task state after it
%   flag        1 answered, -1 no answer within 20 s
[state, flag] = SLSendTrajectoryMex(2, 2, 0.0, zeros(1, SLGetInfoMex()), parameters, 20);
if flag == 1
  reward = state(1);
else
  reward = -Inf;
end
end
