function build_mex(varargin)
%BUILD_MEX  Build horecon_mex (MATLAB: mex, GNU Octave: mkoctfile --mex).
%   build_mex             builds against <repo>/target/release/libhorecon.so
%   build_mex('Verbose')  shows the compiler command lines
%
%   Build the library first: cargo build --release (in the repository root).
%   The MEX lands next to this file (matlab/) with an rpath to the library,
%   so addpath('<repo>/matlab') is all a session needs.
%
%   MATLAB >= R2018a: interleaved complex API (-R2018a, MX_HAS_INTERLEAVED_COMPLEX),
%   linked with libut for Ctrl-C (utIsInterruptPending). GNU Octave: the separate
%   real/imaginary API (Octave 7's interleaved API is broken) and
%   -DHORECON_OCTAVE for Ctrl-C through octave_interrupt_state.
here = fileparts(mfilename('fullpath'));
root = fileparts(here);
include = fullfile(root, 'include');
libdir = fullfile(root, 'target', 'release');
if ~exist(fullfile(libdir, 'libhorecon.so'), 'file') && ~exist(fullfile(libdir, 'libhorecon.dylib'), 'file')
  error('horecon:build', 'build the library first: cargo build --release (no libhorecon in %s)', libdir);
end
source = fullfile(here, 'horecon_mex.c');
verbose = any(strcmpi(varargin, 'Verbose'));
isOctave = exist('OCTAVE_VERSION', 'builtin') ~= 0;
% The rpath is relative to the MEX (matlab/ -> ../target/release). mkoctfile and
% mex both expand $VARIABLES, so $ORIGIN goes to the linker in a response file.
responseFile = [tempname() '.ld'];
fid = fopen(responseFile, 'w');
fprintf(fid, '-rpath=$ORIGIN/../target/release\n');
fclose(fid);
cleanup = onCleanup(@() delete(responseFile));
rpath = ['-Wl,@' responseFile];
if isOctave
  output = fullfile(here, 'horecon_mex.mex');
  args = {'--mex', '-DHORECON_OCTAVE', ['-I' include], source, ['-L' libdir], '-lhorecon', rpath, '-o', output};
  if verbose
    args = [{'-v'}, args];
  end
  [out, status] = mkoctfile(args{:});
  if status ~= 0
    error('horecon:build', 'mkoctfile failed:\n%s', out);
  elseif verbose
    fprintf('%s', out);
  end
else
  args = {'-R2018a', ['-I' include], source, ['-L' libdir], '-lhorecon', '-lut', ...
          ['LDFLAGS=$LDFLAGS ' rpath], '-outdir', here, '-output', 'horecon_mex'};
  if verbose
    args = [{'-v'}, args];
  end
  mex(args{:});
end
fprintf('built horecon_mex in %s\n', here);
end
