function SLDisconnect()
%SLDISCONNECT  Detach from the channel attached by SLConnect (the runner keeps serving it).
episodic_call('disconnect');
end
