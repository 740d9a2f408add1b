function varargout = epEvaluateBatch(Q, contexts, varargin)
%EPEVALUATEBATCH  Evaluate a population of episodes in one call, each a start and one segment.
%   [returns, states, flags] = epEvaluateBatch(Q, contexts)
%   [returns, states, flags, info, logs] = epEvaluateBatch(Q, contexts, name, value, ...)
%
%   Episode k (k = 1..N) starts with the context contexts(:, k) (maxCommands 1), then sends
%   Q(:, :, k) as its segment 1:
%     Q         samples x n_dofs x N desired joint positions, rad: one row per time step, one
%               column per joint (as epSendTrajectory's trajectory), one page per episode;
%               sampled at the control rate unless 'rate' is given
%     contexts  n_context x N, one column per episode (reach: the target [x; y; z] m), or
%               n_context x 1 for the same context in every episode, or [] for the task's default
%   Options, as name-value pairs:
%     'postures'  n_dofs x N start postures, rad (n_dofs x 1: the same for all; [] = the task's
%                 start posture); Q(1, :, k) must lie within the robot's max_start_jump of it
%     'Qd', 'Qdd' samples x n_dofs x N velocities (rad/s) and accelerations (rad/s^2) of Q
%     'rate'      Hz of the samples ([] = the control rate)
%     'waitTime'  s the final posture is held after the last sample (0..60, default 0)
%     'timeOut'   s to wait for each batch ([] = as long as the runner lives; the logs: 30 s)
%
%   returns  1 x N: each episode's return, the sum of its commands' rewards (an early end's charge
%            included, e.g. after a safety abort: the return the runner's log records)
%   states   n_state x N: the task state after each episode's last command sent (reach:
%            target x y z, distance; NaN when that command was refused)
%   flags    1 x N: how each episode ended: 0 OK, else the flag that ended it (as for
%            epSendTrajectory; e.g. 3 invalid payload, 8 discontinuous)
%   info     struct: success (1 x N logical: the task counts the episode as solved), n_steps
%            (1 x N control steps, the move to the start included), episode_id, n_replies
%            (commands sent: 1 when the start was refused), message and flag_name (1 x N
%            cells); per command, column k the episode, row 1 the start and row 2 the
%            segment (NaN when not sent): rewards, command_flags, command_steps (2 x N) and
%            command_states (n_state x 2 x N)
%   logs     1 x N struct array: each episode's per-step log, with the fields of epGetEpisode
%            (asked for, the runner keeps the logs; an episode refused at its start has 0 rows)
%
%   The runner evaluates the episodes side by side (episodic serve --threads), each as the
%   first episode of a fresh runner: an episode's results are bit-identical to its two
%   commands sent with epSendTrajectory to a freshly started runner. Every episode is in the
%   runner's HDF5 log and takes the next episode id (epEpisodeId). A population larger than
%   the runner's batch (info.max_batch of epConnect, episodic serve --max-batch) is sent in
%   several batches. Errors: episodic:size (the arrays' sizes), episodic:batch (the runner
%   refused the batch, e.g. a realtime runner: send the episodes one by one), and those of
%   epSendTrajectory.
if nargin < 2
  error('episodic:argument', ['epEvaluateBatch: usage: epEvaluateBatch(Q, contexts [, ''postures'', P, ' ...
        '''Qd'', Qd, ''Qdd'', Qdd, ''rate'', Hz, ''waitTime'', s, ''timeOut'', s])']);
end
options = struct('postures', [], 'qd', [], 'qdd', [], 'rate', [], 'waittime', [], 'timeout', []);
if mod(numel(varargin), 2) ~= 0
  error('episodic:argument', 'epEvaluateBatch: the options come in name, value pairs');
end
for k = 1:2:numel(varargin)
  name = varargin{k};
  if ~ischar(name) || ~isfield(options, lower(name))
    error('episodic:argument', ['epEvaluateBatch: unknown option %s; use ''postures'', ''Qd'', ''Qdd'', ' ...
          '''rate'', ''waitTime'' or ''timeOut'''], disp_name(name));
  end
  options.(lower(name)) = as_double(varargin{k + 1});
end
[varargout{1:max(1, nargout)}] = episodic_call('evaluate', as_double(Q), as_double(contexts), options.postures, ...
                                               options.qd, options.qdd, options.rate, options.waittime, ...
                                               options.timeout);
end

function text = disp_name(name)
if ischar(name)
  text = ['''' name ''''];
else
  text = sprintf('(a %s)', class(name));
end
end
