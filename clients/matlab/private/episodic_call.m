function varargout = episodic_call(varargin)
%EPISODIC_CALL  episodic_mex(varargin{:}), with its errors raised as the SL* function's own
%   (Octave prefixes a MEX file's error messages with the MEX file's name).
try
  [varargout{1:nargout}] = episodic_mex(varargin{:});
catch err
  if any(strcmp(err.identifier, {'Octave:undefined-function', 'MATLAB:UndefinedFunction'})) && ...
     ~isempty(strfind(err.message, 'episodic_mex'))
    error('episodic:notBuilt', ['episodic_mex is not on the path: build it with episodic_build() ' ...
          'and addpath its folder (clients/matlab/build)']);
  end
  error(err.identifier, '%s', regexprep(err.message, '^episodic_mex: ', ''));
end
end
