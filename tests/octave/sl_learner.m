function sl_learner(data, runner_pid)
%SL_LEARNER  A learner written for SL's interface on the reach task: it calls SL's MEX files as the
%   IAS toolbox's SL environment does (package functions Environments.SL.barrett.*, SL's indices,
%   SL's zero-padded contexts) and sends a command again while its flag is < 0.
%   DATA: a folder with q.bin (the motion, steps x 7 rad, row-major) that receives what the learner
%   got (read by tests/test_sl_mex.py); RUNNER_PID: the runner, paused at the end to see flag -1.
q = read_rows(fullfile(data, 'q.bin'), 7);
context = [0.5 0.2 1.5 zeros(1, 7)];   % SL's start values: the target, zero-padded to 1 x 10
dummy = zeros(1, 7);                   % SL's start trajectory: a dummy, the task's start posture is used

% episode 1: a start and one motion (maxCommands 2), then its log
[start, ~] = send(1, 2, 0, dummy, context, 20);
[motion, ~] = send(2, 2, 0, q, [], 20);
write_rows(fullfile(data, 'states.bin'), [start motion]);
[joints, jointsVel, jointsAcc, jointsDes, jointsVelDes, jointsAccDes, torque, cart, states, commandIdx, stepIdx] = ...
    Environments.SL.barrett.SLGetEpisodeMex(12);
write_rows(fullfile(data, 'episode.bin'), [joints; jointsVel; jointsAcc; jointsDes; jointsVelDes; jointsAccDes; ...
                                           torque; cart; states; commandIdx; stepIdx]);

% episode 2: a start of three commands, one motion, then SL's reset
send(1, 3, 0, dummy, context, 20);
send(2, 3, 0, q, [], 20);
send(-1, 1, 0, dummy, [], 10);

% episode 3: a controller command, which reach refuses (it has no controller of its own)
send(1, 2, 0, dummy, context, 20);
[~, flag, reply] = Environments.SL.barrett.SLSendTrajectoryMex(2, 2, 0, dummy, [1 2 zeros(1, 8)], 20);
printf('CONTROLLER %d %d %s\n', flag, reply.flag, reply.message);

% no answer in time: flag -1, no error
kill(runner_pid, 19);   % SIGSTOP
[state, flag] = Environments.SL.barrett.SLSendTrajectoryMex(1, 2, 0, dummy, context, 0.3);
kill(runner_pid, 18);   % SIGCONT
printf('SILENT %d %d\n', flag, numel(state));
end

function [state, flag] = send(varargin)
flag = -1;
while flag < 0
  [state, flag] = Environments.SL.barrett.SLSendTrajectoryMex(varargin{:});
end
end
