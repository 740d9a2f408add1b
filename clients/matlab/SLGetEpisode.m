function [joints, jointsVel, jointsAcc, jointsDes, jointsVelDes, jointsAccDes, torque, cart, states, commandIdx, stepIdx] = SLGetEpisode(numStates)
%SLGETEPISODE  SL's episode log of the last episode's motion steps, over an episodic channel.
%   [joints, jointsVel, jointsAcc, jointsDes, jointsVelDes, jointsAccDes, torque, cart, states, ...
%    commandIdx, stepIdx] = SLGetEpisode(numStates)
%
%   Each output has one column per motion step (the move to the start left out): joints ...
%   torque n_dofs x steps (rad, rad/s, rad/s^2, N m); cart 7 x steps (the flange's position m and
%   quaternion w x y z); states numStates x steps (default 9): rows 1-3 the ball's position m,
%   4-6 its velocity m/s, 7-9 the cup or target m, by the task's state columns (0 where it has
%   none); commandIdx 1 x steps SL's command index (2 the first motion command); stepIdx 1 x steps
%   the step within its command, from 1.
if nargin < 1
  numStates = 9;
end
[joints, jointsVel, jointsAcc, jointsDes, jointsVelDes, jointsAccDes, torque, cart, states, commandIdx, stepIdx] = ...
    SLGetEpisodeMex(numStates);
end
