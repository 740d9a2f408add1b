function theta = power_update(thetas, returns, top_k, beta)
%POWER_UPDATE  PoWER's update: the reward-weighted average of the best rollouts so far.
%   theta = power_update(thetas, returns, top_k, beta)
%     thetas   n_params x n_rollouts: the parameters of every rollout so far (any units)
%     returns  1 x n_rollouts: their returns (-Inf for a rollout that failed: never used)
%     top_k    how many of the best rollouts enter the average (importance sampling: the
%              rollouts of all past iterations compete, not only the last iteration's)
%     beta     1 / (units of the return): temperature of the weights
%   The weights must not be negative; a return that may be negative is turned into
%       w_i = exp(beta * (R_i - max R))           (in (0, 1], 1 for the best rollout)
%   and theta = sum_i w_i theta_i / sum_i w_i over the top_k rollouts, which is PoWER's
%   theta + sum_i w_i (theta_i - theta) / sum_i w_i with the exploration theta_i - theta.
[sorted_returns, order] = sort(returns, 'descend');
keep = order(1:min(top_k, sum(isfinite(sorted_returns))));
if isempty(keep)
  error('power_update:noRollout', ['power_update: no rollout succeeded; lower the exploration ' ...
        'or check the runner''s messages']);
end
w = exp(beta * (returns(keep) - returns(keep(1))));
theta = thetas(:, keep) * w' / sum(w);
end
