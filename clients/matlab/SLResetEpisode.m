function SLResetEpisode()
%SLRESETEPISODE  SL's reset (command -1): abort the running episode, over an episodic channel.
SLSendTrajectoryMex(-1, 1, 0.0, zeros(1, SLGetInfoMex()), [], 10);
end
