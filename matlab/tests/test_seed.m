function seed = test_seed(name)
%TEST_SEED  Seeds randn/rand from HORECON_TEST_SEED or the clock and prints the seed.
s = getenv('HORECON_TEST_SEED');
if isempty(s)
  seed = mod(floor(now * 86400 * 1000), 2^31);
else
  seed = str2double(s);
end
randn('state', seed); %#ok<RAND>
rand('state', seed);  %#ok<RAND>
fprintf('  %s: seed %d (rerun with HORECON_TEST_SEED=%d)\n', name, seed, seed);
end
