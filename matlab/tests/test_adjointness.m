function test_adjointness()
%TEST_ADJOINTNESS  <E x, d> = <x, E^H d> (relative to |Ex||d|) and <x, E^H E x> = |E x|^2 on random problems.
test_seed('test_adjointness');
nterms = [1 4 9 16];
for trial = 1:4
  pr = random_problem([6 5 1], 1 + mod(trial, 3), 50, nterms(1 + mod(trial, 4)), mod(trial, 2) == 0);
  p = make_plan(pr);
  Ex = double(p.forward(pr.x));
  Ehd = double(p.adjoint(pr.d));
  lhs = Ex(:)' * pr.d(:);
  rhs = pr.x' * Ehd(:);
  % relative to |Ex|.|d| (Cauchy-Schwarz): |<Ex,d>| itself can be small by cancellation
  e = abs(lhs - rhs) / (norm(Ex(:)) * norm(pr.d(:)));
  n = double(p.normal(pr.x));
  e2 = abs(pr.x' * n(:) - norm(Ex(:))^2) / norm(Ex(:))^2;
  fprintf('    trial %d: <Ex,d> vs <x,E''d> %.1e, <x,E''Ex> vs |Ex|^2 %.1e\n', trial, e, e2);
  assert(e < 1e-5 && e2 < 1e-5, 'adjointness %g %g', e, e2);
end
end
