function id = epEpisodeId(next)
%EPEPISODEID  Episode ids of the starts (epSendTrajectory with trajIdx 0).
%   id = epEpisodeId()      the id of the last episode started (before any: the counter's
%                           clock-based origin; each start uses the previous id + 1)
%   epEpisodeId(next)       the next start uses id NEXT (then NEXT + 1, ...), e.g. to
%                           reproduce a Python client's run, which counts the same way
if nargin > 0
  id = episodic_call('episode_id', next);
else
  id = episodic_call('episode_id');
end
end
