function info = horecon_install(varargin)
%HORECON_INSTALL  Set up horecon in this MATLAB or GNU Octave, and check it works.
%   cd <repo>/matlab; horecon_install
%
%   1. finds the library <repo>/target/release/libhorecon.so; if it is missing
%      and cargo is on the system path, builds it (cargo build --release);
%   2. builds the MEX gateway horecon_mex for the running MATLAB (mex -R2018a)
%      or Octave (mkoctfile --mex) when it is missing or older than its source
%      or the header (build_mex);
%   3. adds this folder to the path (and saves the path with 'Save');
%   4. runs a self-test: the sign convention on one voxel, forward and adjoint
%      against a direct sum of the model on a small random problem, and a CG
%      solve; then prints what it did, one line per step.
%
%   horecon_install('Rebuild')  rebuilds the MEX even if it is up to date
%   horecon_install('Save')     also calls savepath, so later sessions have horecon
%   info = horecon_install(...) returns what it did: library, mex, built (true
%      when the MEX was (re)built), path, saved, version, backend,
%      cudaDevices, forwardError, adjointError, cgIterations, selfTestPassed.
%
%   The self-test failing is an error (identifier horecon:install). Then:
%   help horecon (the package), help horecon.Plan, help horecon.sim.
%
%   See also build_mex, horecon.Plan, horecon.version.
here = fileparts(mfilename('fullpath'));
root = fileparts(here);
rebuild = any(strcmpi(varargin, 'Rebuild'));
keepPath = any(strcmpi(varargin, 'Save'));
isOctave = exist('OCTAVE_VERSION', 'builtin') ~= 0;
if isOctave
  runtime = ['GNU Octave ' OCTAVE_VERSION];
  mexFile = fullfile(here, 'horecon_mex.mex');
else
  runtime = ['MATLAB ' version];
  mexFile = fullfile(here, ['horecon_mex.' mexext]);
end
info = struct('library', '', 'mex', mexFile, 'built', false, 'path', here, 'saved', false, ...
              'version', '', 'backend', '', 'cudaDevices', 0, 'forwardError', NaN, ...
              'adjointError', NaN, 'cgIterations', 0, 'selfTestPassed', false);

% 1. the library
libdir = fullfile(root, 'target', 'release');
names = {'libhorecon.so', 'libhorecon.dylib', 'horecon.dll'};
library = find_library(libdir, names);
if isempty(library)
  [status, ~] = system('cargo --version');
  if status ~= 0
    error('horecon:install', ['no libhorecon in %s and no cargo on the system path: install Rust ', ...
          '(https://rustup.rs) and run cargo build --release in %s'], libdir, root);
  end
  fprintf('horecon_install: building the library (cargo build --release in %s) ...\n', root);
  status = system(sprintf('cd "%s" && cargo build --release', root));
  library = find_library(libdir, names);
  if status ~= 0 || isempty(library)
    error('horecon:install', 'cargo build --release failed in %s', root);
  end
end
info.library = library;
fprintf('horecon_install: library  %s\n', library);

% 2. the MEX, for this runtime
sources = {fullfile(here, 'horecon_mex.c'), fullfile(root, 'include', 'horecon.h')};
if rebuild || ~exist(mexFile, 'file') || newer_than(sources, mexFile)
  build_mex();
  info.built = true;
  fprintf('horecon_install: built    %s for %s\n', mexFile, runtime);
else
  fprintf('horecon_install: MEX      %s is up to date for %s (kept; ''Rebuild'' rebuilds it)\n', mexFile, runtime);
end

% 3. the path
addpath(here);
if keepPath
  info.saved = savepath() == 0;
  if ~info.saved
    warning('horecon:install', 'savepath failed: add addpath(''%s'') to your startup file', here);
  end
end
fprintf('horecon_install: path     added %s%s\n', here, ...
        ternary(info.saved, ' (saved with savepath)', ' for this session (''Save'' keeps it)'));

% 4. the self-test
info = self_test(info);
fprintf(['horecon_install: self-test passed: horecon %s, backend %s, %d CUDA device(s); ', ...
         'one-voxel sign ok, forward %.1e and adjoint %.1e vs direct sum, CG %d iterations\n'], ...
        info.version, info.backend, info.cudaDevices, info.forwardError, info.adjointError, ...
        info.cgIterations);
fprintf('horecon_install: done. help horecon, help horecon.Plan; examples in %s\n', fullfile(here, 'examples'));
if nargout == 0
  clear info;
end
end

function library = find_library(libdir, names)
library = '';
for i = 1:numel(names)
  candidate = fullfile(libdir, names{i});
  if exist(candidate, 'file')
    library = candidate;
    return;
  end
end
end

function stale = newer_than(sources, target)
t = dir(target);
stale = false;
for i = 1:numel(sources)
  s = dir(sources{i});
  stale = stale || (~isempty(s) && s.datenum > t.datenum);
end
end

function s = ternary(condition, yes, no)
if condition
  s = yes;
else
  s = no;
end
end

function info = self_test(info)
info.version = horecon.version();
info.cudaDevices = horecon.cudaDeviceCount();
% the sign: one voxel at r0, one sample with k gives d = exp(+1i*k*r0)
p = horecon.Plan([1 1 1], 1, 1, 'Backend', 'cpu');
p.setPositions([0.01 -0.02 0]);
p.setTrajectory([200 50 0]);
d = p.forward(1);
delete(p);
if abs(double(d) - exp(1i)) > 1e-5
  error('horecon:install', 'self-test: one voxel gave %s, expected exp(+1i) (sign convention)', num2str(d));
end
% forward and adjoint against the model's direct sum, on a 2-coil problem with scattered
% values (deterministic, and the user's random number generator is left alone)
nx = 6; ny = 5; M = 40; L = 2; N = nx * ny;
P = [reshape(repmat((0:nx - 1)' - 3, 1, ny), [], 1), reshape(repmat((0:ny - 1) - 2, nx, 1), [], 1), zeros(N, 1)] * 0.01;
j = (1:M)';
k = 150 * [sin(1.3 * j), cos(2.1 * j)];
n = (1:N)';
S = [complex(1 + 0.3 * sin(n), cos(0.7 * n)), complex(cos(1.1 * n), 1 - 0.2 * sin(3 * n))];
x = complex(sin(0.9 * n), cos(1.7 * n));
E = exp(1i * (k * P(:, 1:2)'));                 % M x N
reference = [E * (S(:, 1) .* x), E * (S(:, 2) .* x)];
p = horecon.Plan([nx ny 1], L, M);
cleanup = onCleanup(@() delete(p));
p.setPositions(P);
p.setTrajectory(k);
p.setSensitivities(S);
info.backend = p.backend();
d = double(p.forward(x));
info.forwardError = norm(d(:) - reference(:)) / norm(reference(:));
y = double(p.adjoint(reference));
adjointReference = sum(conj(S) .* (E' * reference), 2);
info.adjointError = norm(y(:) - adjointReference(:)) / norm(adjointReference(:));
[~, cgInfo] = p.cg(single(reference), 'MaxIterations', 10);
info.cgIterations = double(cgInfo.iterations);
if ~(info.forwardError < 1e-4 && info.adjointError < 1e-4 && info.cgIterations >= 1)
  error('horecon:install', 'self-test failed: forward error %.2e, adjoint error %.2e (expected < 1e-4), CG %d iterations', ...
        info.forwardError, info.adjointError, info.cgIterations);
end
info.selfTestPassed = true;
end
