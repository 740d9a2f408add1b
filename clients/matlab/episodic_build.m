function mexfile = episodic_build(outdir)
%EPISODIC_BUILD  Compile the MEX file behind the SL*.m functions (episodic_mex).
%   episodic_build()        builds into clients/matlab/build
%   episodic_build(outdir)  builds into outdir
%   mexfile = episodic_build(...) returns the path of the MEX file.
%
%   Uses Octave's mkoctfile --mex or Matlab's mex on episodic_mex.c and the C client
%   (clients/c/episodic_client.c), linked with -lrt -lpthread. Afterwards:
%       addpath(outdir); addpath(<this folder>);
%   The same by hand, from clients/matlab:
%       mkoctfile --mex -o build/episodic_mex.mex -I../c episodic_mex.c ../c/episodic_client.c -lrt -lpthread
%       mex -outdir build -output episodic_mex -I../c episodic_mex.c ../c/episodic_client.c -lrt -lpthread
here = fileparts(mfilename('fullpath'));
csrc = fullfile(here, '..', 'c');
if nargin < 1 || isempty(outdir)
  outdir = fullfile(here, 'build');
end
if ~exist(outdir, 'dir')
  mkdir(outdir);
end
sources = {fullfile(here, 'episodic_mex.c'), fullfile(csrc, 'episodic_client.c')};
if exist('OCTAVE_VERSION', 'builtin')
  mexfile = fullfile(outdir, 'episodic_mex.mex');
  [output, status] = mkoctfile('--mex', '-o', mexfile, ['-I' csrc], sources{:}, '-lrt', '-lpthread');
  if status ~= 0
    error('episodic:build', 'episodic_build: mkoctfile failed:\n%s', output);
  end
else
  mex('-outdir', outdir, '-output', 'episodic_mex', ['-I' csrc], sources{:}, '-lrt', '-lpthread');
  mexfile = fullfile(outdir, ['episodic_mex.' mexext]);
end
end
