function dead_runner(channel, sync)
%DEAD_RUNNER  A silent runner (SIGSTOP), then a dead one (SIGKILL), driven by tests/test_clients.py
%   through marker files in SYNC: this script writes one and waits for the test's answer.
home = [0, 0.5876, 0, 1.36, 0, -0.321, -1.57];
q = repmat(home, 100, 1);
epConnect(channel);
[~, ~, f] = epSendTrajectory([], 0, 0, 3, [], 10);
printf('START %d\n', f);
handshake(sync, 'started', 'stopped');            % the runner is stopped now
t0 = tic;
expect_error('silent', @() epSendTrajectory(q, 0, 1, 3, [], 0.5));
printf('ELAPSED silent %.3f\n', toc(t0));
handshake(sync, 'timed_out', 'continued');        % the runner runs again
[~, ~, f, i] = epSendTrajectory([], 0, 0, 3, [], 10);
printf('RESTART %d %d\n', f, i.episode_id == epEpisodeId());
handshake(sync, 'restarted', 'killed');           % the runner is dead now
t0 = tic;
expect_error('dead', @() epSendTrajectory(q, 0, 1, 3, [], 10));
printf('ELAPSED dead %.3f\n', toc(t0));
expect_error('after', @() epGetEpisode());
fflush(stdout);
end

function handshake(sync, mine, theirs)
fclose(fopen(fullfile(sync, mine), 'w'));
fflush(stdout);
t0 = tic;
while ~exist(fullfile(sync, theirs), 'file')
  if toc(t0) > 30
    error('dead_runner: no %s marker from the test within 30 s', theirs);
  end
  pause(0.02);
end
end
