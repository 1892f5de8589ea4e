function previous = progress(mode, delay)
%PROGRESS  How long horecon calls show their progress.
%   horecon.progress('auto')     (the default) a waitbar in the MATLAB desktop and
%                                the Octave GUI, a text line in a terminal session
%   horecon.progress('waitbar')  always a waitbar (a text line where none can be drawn)
%   horecon.progress('text')     a text line in the command window
%   horecon.progress('off')      nothing
%   horecon.progress(mode, delay)  shown only for calls still running after delay
%                                seconds (default 1; 0 shows every call)
%   previous = horecon.progress(...) returns the mode before the call;
%   horecon.progress() returns the mode.
%
%   Every long call (forward, adjoint, normal, cg, gridding, fhd, q and the
%   simulation toolkit) reports its progress; the waitbar's Cancel button,
%   closing the waitbar, or Ctrl-C cancels the call (error horecon:cancelled)
%   and leaves the plan usable. The setting lasts until horecon_mex is cleared.
if nargin == 0
  previous = horecon_mex('progress');
elseif nargin == 1
  previous = horecon_mex('progress', mode);
else
  previous = horecon_mex('progress', mode, delay);
end
end
