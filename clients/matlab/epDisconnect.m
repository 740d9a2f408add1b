function epDisconnect()
%EPDISCONNECT  Detach from the channel attached by epConnect (the runner keeps serving it).
episodic_call('disconnect');
end
