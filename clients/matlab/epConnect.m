function info = epConnect(channel)
%EPCONNECT  Attach to the runner serving CHANNEL (`episodic serve --channel CHANNEL`).
%   epConnect(channel)          attach once; every ep* call then uses this channel
%   info = epConnect(channel)   also returns the channel's sizes: n_dofs, max_samples,
%                               max_log_steps, max_context, control_rate (Hz), state_names,
%                               log_columns, runner_pid, episode_id (of the last start),
%                               max_batch, max_batch_commands, max_batch_values (the most
%                               episodes, commands and values of one epEvaluateBatch batch)
%   epConnect()                 the channel 'default'
%
%   The attachment is kept in the MEX file until epDisconnect, `clear episodic_mex` or the end
%   of the session. Calling epConnect again re-attaches (e.g. after the runner was restarted).
%   Errors: episodic:noChannel (no runner serves it), episodic:foreignChannel (an object of
%   the channel belongs to another user), episodic:version (the runner speaks another protocol
%   version), episodic:channel (not an episodic channel / corrupt header).
if nargin < 1 || isempty(channel)
  channel = 'default';
end
if ~ischar(channel)
  error('episodic:argument', 'epConnect: channel must be a string');
end
if nargout > 0
  info = episodic_call('connect', channel);
else
  episodic_call('connect', channel);
end
end
