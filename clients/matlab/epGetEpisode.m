function episode = epGetEpisode()
%EPGETEPISODE  The per-step log of the current or last episode, as a struct.
%   episode = epGetEpisode()
%
%   One field per log column, each steps x width (one row per control step):
%     time, machine_state, index, step (steps x 1); q, qd, qdd (measured), q_d, qd_d, qdd_d
%     (desired), u (torque), u_ff (its feedforward share) (steps x n_dofs); ee_pos (x 3),
%     ee_quat (x 4, w x y z), task_state (x n_state), reward (x 1);
%   plus one steps x 1 field per task state column (reach: target_x, target_y, target_z,
%   distance). The rows are those of the last reply (its info.log_rows); an episode longer
%   than the runner's --max-log-steps keeps its first rows (info.log_truncated).
episode = episodic_call('episode');
end
