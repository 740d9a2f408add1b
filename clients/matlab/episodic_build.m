function mexfiles = episodic_build(outdir)
%EPISODIC_BUILD  Compile the MEX files: episodic_mex (behind the ep*.m functions) and SL's
%   SLSendTrajectoryMex, SLGetEpisodeMex and SLGetInfoMex (sl_mex.c: SL's interface over an
%   episodic channel, for learners written for SL).
%   episodic_build()        builds into clients/matlab/build
%   episodic_build(outdir)  builds into outdir, e.g. a toolbox's package folder
%                           ('.../+Environments/+SL/+barrett') for SL's MEX files
%   mexfiles = episodic_build(...) returns their paths (a cell array).
%
%   Uses Octave's mkoctfile --mex or Matlab's mex with the C client (clients/c/episodic_client.c),
%   linked with -lrt -lpthread. Afterwards:
%       addpath(outdir); addpath(<this folder>);
%   The same by hand, from clients/matlab (Octave; Matlab: mex -outdir build -output NAME ...):
%       mkoctfile --mex -o build/episodic_mex.mex -I../c episodic_mex.c ../c/episodic_client.c -lrt -lpthread
%       mkoctfile --mex -o build/SLSendTrajectoryMex.mex -I../c sl_mex.c ../c/episodic_client.c -lrt -lpthread
%   (and the same for SLGetEpisodeMex and SLGetInfoMex).
here = fileparts(mfilename('fullpath'));
csrc = fullfile(here, '..', 'c');
if nargin < 1 || isempty(outdir)
  outdir = fullfile(here, 'build');
end
if ~exist(outdir, 'dir')
  mkdir(outdir);
end
targets = {'episodic_mex', 'episodic_mex.c'; 'SLSendTrajectoryMex', 'sl_mex.c'; ...
           'SLGetEpisodeMex', 'sl_mex.c'; 'SLGetInfoMex', 'sl_mex.c'};
mexfiles = cell(1, size(targets, 1));
for k = 1:size(targets, 1)
  sources = {fullfile(here, targets{k, 2}), fullfile(csrc, 'episodic_client.c')};
  if exist('OCTAVE_VERSION', 'builtin')
    mexfiles{k} = fullfile(outdir, [targets{k, 1} '.mex']);
    [output, status] = mkoctfile('--mex', '-o', mexfiles{k}, ['-I' csrc], sources{:}, '-lrt', '-lpthread');
    if status ~= 0
      error('episodic:build', 'episodic_build: mkoctfile failed for %s:\n%s', targets{k, 1}, output);
    end
  else
    mex('-outdir', outdir, '-output', targets{k, 1}, ['-I' csrc], sources{:}, '-lrt', '-lpthread');
    mexfiles{k} = fullfile(outdir, [targets{k, 1} '.' mexext]);
  end
end
end
