function G = phase_basis(n_samples, n_basis)
%PHASE_BASIS  Shape matrix of a rest-to-rest motion made of Gaussian basis functions.
%   G = phase_basis(n_samples, n_basis) is n_samples x n_basis: a motion from posture q0
%   (1 x n_joints rad) with weights W (n_basis x n_joints rad) is
%       q = q0 + G * W        (n_samples x n_joints rad, one row per control step)
%   G(t, i) = s(t) * psi_i(s(t)) / sum_j psi_j(s(t)), where s is the minimum-jerk phase
%   s = 10 tau^3 - 15 tau^4 + 6 tau^5 (tau = 0..1 over the samples) and psi_i the Gaussian
%   exp(-(s - c_i)^2 / (2 h^2)), centres c_i evenly spaced on [0, 1], width h their spacing.
%   So q starts at q0 (G's first row is 0), ends at q0 + G(end, :) * W, a weighted average of
%   the weights dominated by the last ones, and both ends are at rest: dq/dt is s'(t) times a
%   bounded factor and s' = 0 at tau = 0 and 1.
tau = linspace(0, 1, n_samples)';
s = tau .^ 3 .* (10 - 15 * tau + 6 * tau .^ 2);
centres = linspace(0, 1, n_basis);
width = 1 / (n_basis - 1);
psi = exp(-(repmat(s, 1, n_basis) - repmat(centres, n_samples, 1)) .^ 2 / (2 * width ^ 2));
G = repmat(s ./ sum(psi, 2), 1, n_basis) .* psi;
end
