function round_trip(channel, n)
%ROUND_TRIP  Median time of a 2 s segment (1000 x 7 at 500 Hz) plus its log fetch, over n episodes.
home = [0, 0.5876, 0, 1.36, 0, -0.321, -1.57];
t = (1:1000)' / 1000;
q = home + 0.2 * sin(pi * t) * linspace(1, 0.3, 7);
epConnect(channel);
times = zeros(n + 1, 2);
for k = 1:n + 1                       % the first round warms up
  epSendTrajectory([], 0, 0, 1, [0.5 0.2 1.5], 10);
  t0 = tic;
  [~, ~, f] = epSendTrajectory(q, 0, 1, 1, [], 10);
  times(k, 1) = toc(t0);
  episode = epGetEpisode();
  times(k, 2) = toc(t0);
  if f ~= 0 || size(episode.q, 1) < 1000
    error('round_trip: flag %d, %d log rows', f, size(episode.q, 1));
  end
end
printf('ROUNDTRIP %.6f SEND %.6f\n', median(times(2:end, 2)), median(times(2:end, 1)));
epDisconnect();
end
