function [reward, state, flag, info, success, episodeReturn] = epSendTrajectory(trajectory, waitTime, trajIdx, maxCommands, stateBuffer, timeOut, rate)
%EPSENDTRAJECTORY  Start an episode (trajIdx 0) or send one trajectory segment (trajIdx >= 1).
%   [reward, state, flag] = epSendTrajectory(trajectory, waitTime, trajIdx, maxCommands, stateBuffer, timeOut)
%   [reward, state, flag, info] = epSendTrajectory(..., timeOut, rate)
%   [reward, state, flag, info, success, episodeReturn] = epSendTrajectory(...)
%
%   trajIdx 0 starts episode (a new episode id each time, see epEpisodeId):
%     trajectory   the start posture, 1 x n_dofs rad, or [] for the task's start posture
%     waitTime     unused
%     maxCommands  segments the episode will have (1..1000)
%     stateBuffer  the context, e.g. the reach target [x y z] m ([] for the task's default)
%   The reply comes once the robot is at the start posture; info.posture is that posture
%   (1 x n_dofs rad): start segment 1 there (within 0.1 rad on the WAM, else flag 8).
%
%   trajIdx k = 1..maxCommands sends segment k of the running episode:
%     trajectory   desired joint positions, steps x n_dofs rad (one row per time step, one
%                  column per joint, as in Python); sampled at the control rate (500 Hz on
%                  the WAM) unless RATE (Hz) is given. A struct with fields q (steps x n_dofs),
%                  and optionally qd (rad/s), qdd (rad/s^2) and rate also works.
%     waitTime     s the final posture is held after the last sample (0..60)
%     maxCommands  as given at the start
%     stateBuffer  unused
%
%   trajIdx -1 aborts the running episode, as epReset(timeOut) (trajectory, waitTime,
%   maxCommands and stateBuffer unused).
%
%   stateBuffer and timeOut may be left out ([]). These are this client's own indices (0 starts);
%   SL's conventions (1 starts, flag 1 = answered) are SLSendTrajectoryMex's, clients/README.md.
%
%   timeOut  s to wait for the reply ([] or left out = 30 s); on expiry error episodic:timeout names the
%            channel; a runner that died gives episodic:runnerGone.
%   reward   the segment's reward (0 for a start; in the command that ends an episode early, the
%            charge for the part it leaves out is included, see episodeReturn)
%   state    1 x n_state: the task state after the command (reach: target x y z, distance)
%   flag     0 OK; 1 out of order, 2 stale episode, 3 invalid payload, 4 safety abort,
%            5 timeout, 6 aborted by learner, 7 interrupted, 8 discontinuous (the segment
%            starts too far from the posture held), 9 internal error (the episode is then over)
%   info     struct: episode_id, index, flag_name, n_steps, episode_done, machine_state,
%            log_rows, log_truncated, message (why the flag is not OK), state, posture
%            (1 x n_dofs rad: the posture held after the command, where the next segment
%            must start), success, episode_return (as the two outputs below)
%   success  true only in the reply that ends an episode (info.episode_done 1, after its last
%            segment or a flag that is not 0) that the task counts as solved; flag then says how
%            the episode ended
%   episodeReturn  the return of the command's episode so far: the rewards of its commands up to
%            this one; in the reply that ends it, the episode's return as the runner's log
%            records it, a charge for ending early included (e.g. reach is scored over 1.2 s of
%            motion: an episode aborted sooner is charged the rest at its worst cost rate)
%
%   Matlab stores matrices column-major and the protocol row-major; the MEX file converts.
if nargin < 4
  error('episodic:argument', ['epSendTrajectory: usage: epSendTrajectory(trajectory, waitTime, trajIdx, ' ...
        'maxCommands [, stateBuffer, timeOut, rate])']);
end
if nargin < 5
  stateBuffer = [];
end
if nargin < 6
  timeOut = [];
end
if nargin < 7
  rate = [];
end
qd = [];
qdd = [];
q = trajectory;
if isstruct(trajectory)
  if ~isfield(trajectory, 'q')
    error('episodic:argument', 'epSendTrajectory: a trajectory struct needs the field q (steps x joints)');
  end
  q = trajectory.q;
  if isfield(trajectory, 'qd'), qd = trajectory.qd; end
  if isfield(trajectory, 'qdd'), qdd = trajectory.qdd; end
  if isfield(trajectory, 'rate') && isempty(rate), rate = trajectory.rate; end
end
if ~isnumeric(trajIdx) || ~isscalar(trajIdx) || ~(trajIdx == -1 || (trajIdx >= 0 && trajIdx == fix(trajIdx)))
  error('episodic:argument', ['epSendTrajectory: trajIdx must be 0 (start an episode), 1..maxCommands ' ...
        '(its segments) or -1 (reset), got %s'], mat2str(trajIdx));
end
if trajIdx == -1
  [reward, state, flag, info, success, episodeReturn] = episodic_call('reset', timeOut);
elseif trajIdx == 0
  [reward, state, flag, info, success, episodeReturn] = episodic_call('start', as_double(q), as_double(stateBuffer), ...
                                                                     maxCommands, timeOut);
else
  [reward, state, flag, info, success, episodeReturn] = episodic_call('trajectory', as_double(q), as_double(qd), ...
                                                                     as_double(qdd), rate, waitTime, trajIdx, ...
                                                                     maxCommands, timeOut);
end
end
