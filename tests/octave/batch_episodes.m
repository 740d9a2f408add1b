function batch_episodes(channel, data, episode_id)
%BATCH_EPISODES  The populations of tests/test_clients.py's batch test, from Octave.
%   data: folder with contexts.bin (N rows of n_context), postures.bin (N rows of n_dofs), Q.bin,
%   Qd.bin, Qdd.bin (N pages of samples x n_dofs) and Q2.bin (a second population), row-major
%   float64. The first population is evaluated with its logs, the second at 250 Hz, held 0.1 s,
%   all with the same context. Writes <first|second>.bin (one row per episode: return, flag,
%   success, n_steps, episode_id, n_replies, rewards (2), command_flags (2), command_steps (2),
%   the final state, command_states (n_state x 2, column by column)), <first|second>.txt (the
%   messages) and per episode k of the first its log: log<k>_<field>.bin, listed in logs.txt.
info = epConnect(channel);
n = info.n_dofs;
epEpisodeId(episode_id);
contexts = read_rows(fullfile(data, 'contexts.bin'), 3).';
postures = read_rows(fullfile(data, 'postures.bin'), n).';
pages = columns(contexts);
Q = read_pages(fullfile(data, 'Q.bin'), n, pages);
Qd = read_pages(fullfile(data, 'Qd.bin'), n, pages);
Qdd = read_pages(fullfile(data, 'Qdd.bin'), n, pages);
[returns, states, flags, details, logs] = epEvaluateBatch(Q, contexts, 'postures', postures, 'Qd', Qd, 'Qdd', Qdd);
write_results(fullfile(data, 'first'), returns, states, flags, details);
fid = fopen(fullfile(data, 'logs.txt'), 'w');
for k = 1:numel(logs)
  names = fieldnames(logs(k));
  for f = 1:numel(names)
    value = logs(k).(names{f});
    fprintf(fid, '%d %s %d %d\n', k - 1, names{f}, size(value, 1), size(value, 2));
    write_rows(fullfile(data, sprintf('log%d_%s.bin', k - 1, names{f})), value);
  end
end
fclose(fid);
Q2 = read_pages(fullfile(data, 'Q2.bin'), n, 3);
[returns, states, flags, details] = epEvaluateBatch(Q2, [0.5; 0.2; 1.5], 'rate', 250, 'waitTime', 0.1, 'timeOut', 30);
write_results(fullfile(data, 'second'), returns, states, flags, details);
epDisconnect();
end

function write_results(prefix, returns, states, flags, d)
N = numel(returns);
write_rows([prefix '.bin'], [returns; flags; d.success; d.n_steps; d.episode_id; d.n_replies; d.rewards; ...
                             d.command_flags; d.command_steps; states; reshape(d.command_states, [], N)].');
fid = fopen([prefix '.txt'], 'w');
fprintf(fid, '%s\n', d.message{:});
fclose(fid);
end
