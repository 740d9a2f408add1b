% POWER_REACH  PoWER on the reach task from Octave or Matlab, over the shared-memory channel.
%
% Policy search as in Kober & Peters ("Policy search for motor primitives in robotics", NIPS
% 2008), written as the plain loop a Matlab user writes: sample, evaluate the whole
% iteration in one epEvaluateBatch call, update.
%
% Policy: one rest-to-rest motion of move_time s from the start posture q0 (1 x n_dofs rad) of
% the joints in `joints` (base, shoulder, upper-arm roll and elbow: j1..j4), the others held:
%     Q = q0 + G * W,   G = phase_basis(n_steps, n_basis),   theta = W(:)
% W is n_basis x numel(joints) rad (5 Gaussian basis functions per joint on a minimum-jerk
% phase, see examples/octave/phase_basis.m): the motion ends at q0 + G(end, :) * W, a
% goal posture set mostly by the last weights, and the other weights shape the way there.
% The start is theta = 0: the arm stays at q0.
%
% Reward: the task's return R = -(integral of the hand's distance to the target + effort),
% m s, over the move and the hold_time s after it. R is negative, so PoWER's weights are
% w = exp(beta * (R - max R)) over the top_k best rollouts so far (examples/octave/power_update.m).
%
% PoWER, per iteration i = 1, 2, ...: n_rollouts samples theta_k = theta + eps_k with
% eps_k ~ N(0, (sigma decay^(i-1))^2) per parameter, evaluated in one batch (each episode as
% the first of a fresh runner);
% theta <- the w-weighted average of the top_k rollouts of all iterations so far. A rollout
% whose flag is not 0 (e.g. 4, a safety abort) never enters the average.
%
% Driven by variables set before it runs (defaults when unset):
%     channel  the runner's channel ('default')
%     n_iter   iterations (20)
%     seed     seed of the exploration noise (0)
%     out_csv  the learning curve, one row per iteration: iteration, mean_return and
%              best_return (of that iteration's rollouts, m s), failed (rollouts whose flag
%              was not 0) (runs/power_reach.csv in the repository; a relative path is taken
%              from the examples folder, where run() executes the script)
%     target   the reach target [x; y; z] m ([0.5; 0.2; 1.5])
% Measured (seed 0, the defaults): holding q0 returns -0.647 m s (the hand 0.285 m from the
% target for 2 s, plus the effort of holding against gravity); the first iteration's samples
% average -0.688, the 10th -0.339, the 20th -0.293, whose best rollout (-0.290) ends 2 mm
% from the target. For comparison, the inverse-kinematics goal reached by a minimum-jerk
% move of the same 1.5 s + 0.5 s (examples/reach_learner.py's method) returns -0.275.
% Over seeds 0-9 the 10th iteration's mean is 0.29 to 0.41 m s above the first's and the
% 20th's is -0.373 to -0.269 (median -0.300). The 200 episodes take about 3 s (one runner
% thread).
%
% With a runner started by `episodic serve --task reach`, from the repository root:
%     octave --eval "n_iter = 10; seed = 1; run('examples/power_reach.m')"
% It builds the MEX file (clients/matlab/build) the first time unless episodic_mex is on the
% path already. A blocking runner's results depend only on the commands, so a seed gives the
% same curve on every run, bit for bit.

if ~exist('channel', 'var'), channel = 'default'; end
if ~exist('n_iter', 'var'), n_iter = 20; end
if ~exist('seed', 'var'), seed = 0; end
if ~exist('target', 'var'), target = [0.5; 0.2; 1.5]; end
root = fileparts(fileparts(mfilename('fullpath')));
if ~exist('out_csv', 'var'), out_csv = fullfile(root, 'runs', 'power_reach.csv'); end

joints = 1:4;        % the joints that move the hand: base, shoulder, upper-arm roll, elbow
n_basis = 5;         % Gaussian basis functions per joint
move_time = 1.5;     % s, the motion; then held for hold_time s
hold_time = 0.5;     % s
n_rollouts = 10;     % samples per iteration, one batch
top_k = 10;          % best rollouts so far in each update
sigma = 0.3;         % rad, exploration of each weight in the first iteration ...
decay = 0.85;        % ... times decay each iteration
beta = 80;           % 1/(m s), temperature of the weights exp(beta * (R - max R))

addpath(fullfile(root, 'clients', 'matlab'), fullfile(root, 'examples', 'octave'));
if exist('episodic_mex', 'file') ~= 3
  build = fullfile(root, 'clients', 'matlab', 'build');
  if ~exist(fullfile(build, ['episodic_mex.' mexext]), 'file')
    episodic_build(build);
  end
  addpath(build);
end
% The exploration noise, the same samples on every run of a seed: Octave seeds randn with
% randn('state', seed), Matlab with rng(seed) (Matlab's generator differs, so its curve for a
% seed differs from Octave's).
if exist('OCTAVE_VERSION', 'builtin')
  randn('state', seed);
else
  rng(seed);
end

info = epConnect(channel);
distance_row = find(strcmp(info.state_names, 'distance'));
[~, ~, flag, start] = epSendTrajectory([], 0, 0, 1, target, 10);   % learn the start posture ...
if flag ~= 0
  error('power_reach:start', 'power_reach: the start was refused (flag %d): %s', flag, start.message);
end
epReset(10);                                                          % ... and end that episode
q0 = start.posture;
n_steps = round(move_time * info.control_rate);
G = phase_basis(n_steps, n_basis);
n_params = n_basis * numel(joints);

theta = zeros(n_params, 1);
thetas = zeros(n_params, 0);    % every rollout so far (importance sampling)
returns = zeros(1, 0);
curve = zeros(n_iter, 4);       % iteration, mean return, best return, failed
for it = 1:n_iter
  trials = repmat(theta, 1, n_rollouts) + sigma * decay ^ (it - 1) * randn(n_params, n_rollouts);
  Q = repmat(q0, [n_steps, 1, n_rollouts]);
  for k = 1:n_rollouts
    Q(:, joints, k) = Q(:, joints, k) + G * reshape(trials(:, k), n_basis, numel(joints));
  end
  [R, states, flags] = epEvaluateBatch(Q, target, 'waitTime', hold_time);
  ranked = R;
  ranked(flags ~= 0) = -Inf;
  thetas = [thetas, trials];
  returns = [returns, ranked];
  theta = power_update(thetas, returns, top_k, beta);
  [best, b] = max(ranked);
  curve(it, :) = [it, mean(R), best, sum(flags ~= 0)];
  fprintf('%3d  mean return %8.4f  best %8.4f m s  (final distance %.3f m)  failed %d\n', ...
          it, mean(R), best, states(distance_row, b), sum(flags ~= 0));
end
epDisconnect();

folder = fileparts(out_csv);
if ~isempty(folder) && ~exist(folder, 'dir')
  mkdir(folder);
end
fid = fopen(out_csv, 'w');
if fid < 0
  error('power_reach:csv', 'power_reach: cannot write %s; set out_csv to a writable file', out_csv);
end
fprintf(fid, 'iteration,mean_return,best_return,failed\n');
fprintf(fid, '%d,%.17g,%.17g,%d\n', curve');
fclose(fid);
fprintf('learning curve written to %s\n', out_csv);
