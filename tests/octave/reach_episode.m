function reach_episode(channel, data, episode_id)
%REACH_EPISODE  The commands of tests/test_clients.py's bit-identity test, from Octave.
%   data: folder with posture.bin, context.bin, gains.bin (n x 3 [kp kd ki]), q1.bin, q2.bin,
%   qd2.bin, qdd2.bin, q3.bin (row-major float64). Writes replies.bin (one row per command:
%   reward, flag, episode_id, n_steps, state, posture) and one <field>.bin per epGetEpisode field.
info = epConnect(channel);
epEpisodeId(episode_id);
n = info.n_dofs;
posture = read_rows(fullfile(data, 'posture.bin'), n);
context = read_rows(fullfile(data, 'context.bin'), 3);
gains = read_rows(fullfile(data, 'gains.bin'), 3);
replies = [];
[r, s, f, i] = epSendTrajectory(posture, 0, 0, 4, context, 10);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
[r, s, f, i] = epSendController(gains, 0.05, 1, 4, [], 10, 'inverse_dynamics');
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
% segment 2: 250 Hz samples, the rate as the 7th argument
[r, s, f, i] = epSendTrajectory(read_rows(fullfile(data, 'q1.bin'), n), 0, 2, 4, [], 10, 250);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
% segment 3: a struct with velocities and accelerations
seg = struct('q', read_rows(fullfile(data, 'q2.bin'), n), 'qd', read_rows(fullfile(data, 'qd2.bin'), n), ...
             'qdd', read_rows(fullfile(data, 'qdd2.bin'), n));
[r, s, f, i] = epSendTrajectory(seg, 0, 3, 4, [], 10);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
% segment 4: held 0.1 s at the end
[r, s, f, i] = epSendTrajectory(read_rows(fullfile(data, 'q3.bin'), n), 0.1, 4, 4, [], 10);
replies(end+1, :) = [r, f, i.episode_id, i.n_steps, s, i.posture];
write_rows(fullfile(data, 'replies.bin'), replies);
episode = epGetEpisode();
names = fieldnames(episode);
fid = fopen(fullfile(data, 'fields.txt'), 'w');
for k = 1:numel(names)
  value = episode.(names{k});
  fprintf(fid, '%s %d %d\n', names{k}, size(value, 1), size(value, 2));
  write_rows(fullfile(data, [names{k} '.bin']), value);
end
fclose(fid);
epDisconnect();
end
