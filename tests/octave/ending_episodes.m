function ending_episodes(channel, targets, motions, samples)
%ENDING_EPISODES  The episodes of tests/test_bridge.py's ENDINGS, from Octave.
%   Episode k starts with the target targets(k, :) (m, the context; maxCommands 1), then holds the
%   start posture samples(k) samples (motions{k} 'hold'), or steps joint 1 by 1.5 rad after 10
%   samples ('jump'), or resets ('reset'). Prints each reply as "REPLY episode flag episode_done
%   success reward episodeReturn n_steps" from epSendTrajectory's and epReset's outputs, and errors
%   when info.success or info.episode_return disagree with the outputs success and episodeReturn.
epConnect(channel);
for k = 1:numel(motions)
  [r, ~, f, info, success, episodeReturn] = epSendTrajectory([], 0, 0, 1, targets(k, :), 10);
  print_reply(k - 1, r, f, info, success, episodeReturn);
  if strcmp(motions{k}, 'reset')
    [r, ~, f, info, success, episodeReturn] = epReset(10);
  else
    q = repmat(info.posture, samples(k), 1);
    if strcmp(motions{k}, 'jump')
      q(11:end, 1) = q(11:end, 1) + 1.5;
    end
    [r, ~, f, info, success, episodeReturn] = epSendTrajectory(q, 0, 1, 1, [], 10);
  end
  print_reply(k - 1, r, f, info, success, episodeReturn);
end
epDisconnect();
end

function print_reply(episode, reward, flag, info, success, episodeReturn)
if ~islogical(success) || info.success ~= success || info.episode_return ~= episodeReturn
  error('ending_episodes:outputs', 'info.success and info.episode_return must be the outputs success and episodeReturn');
end
printf('REPLY %d %d %d %d %.17g %.17g %d\n', episode, flag, info.episode_done, success, reward, episodeReturn, ...
       info.n_steps);
end
