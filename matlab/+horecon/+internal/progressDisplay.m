function stop = progressDisplay(label, fraction, seconds, finished, mode)
%PROGRESSDISPLAY  (internal, called by horecon_mex during a long call) Draws its
%   progress: fraction (0..1) of the call label after seconds; finished 1 (done)
%   or 2 (stopped by an error) closes it. mode is horecon.progress's: 'auto',
%   'waitbar' or 'text'. Returns true
%   when the user asked to cancel (the waitbar's Cancel button, or closing it).
%   Runs inside the library call: horecon functions cannot be called from here.
persistent bar noWaitbar textShown
global HORECON_PROGRESS_HOOK  % tests only: a function of (label, fraction) run here
stop = false;
if ~isempty(HORECON_PROGRESS_HOOK)
  HORECON_PROGRESS_HOOK(label, fraction);
end
name = ['horecon ' label];
if strcmp(mode, 'auto')
  if graphicsAvailable()
    mode = 'waitbar';
  else
    mode = 'text';
  end
end
if strcmp(mode, 'waitbar') && isempty(noWaitbar)
  try
    [bar, stop] = drawWaitbar(bar, name, fraction, finished);
    return;
  catch
    bar = [];
    noWaitbar = true;  % none can be drawn here (no graphics): the text line from now on
  end
end
if finished
  if isequal(textShown, true) && finished == 2
    fprintf('\r%s: stopped after %.1f s\n', name, seconds);
  elseif isequal(textShown, true)
    fprintf('\r%s: done in %.1f s\n', name, seconds);
  end
  textShown = false;
else
  fprintf('\r%s: %3.0f %% (%.0f s)', name, 100 * fraction, seconds);
  textShown = true;
end
end

function [bar, stop] = drawWaitbar(bar, name, fraction, finished)
stop = false;
if finished
  if ~isempty(bar) && ishandle(bar)
    delete(bar);
  end
  bar = [];
  return;
end
message = sprintf('%s: %.0f %%', name, 100 * fraction);
if ~isempty(bar) && ~ishandle(bar)
  bar = [];
  stop = true;  % closed by the user: cancel
  return;
end
if isempty(bar)
  bar = waitbar(fraction, message, 'Name', 'horecon', ...
                'CreateCancelBtn', @(varargin) setappdata(gcbf(), 'horeconCancel', true));
  setappdata(bar, 'horeconCancel', false);
else
  waitbar(fraction, bar, message);
end
stop = isequal(getappdata(bar, 'horeconCancel'), true);
end

function yes = graphicsAvailable()
if exist('OCTAVE_VERSION', 'builtin') ~= 0
  yes = isguirunning();
else
  yes = usejava('desktop');
end
end
