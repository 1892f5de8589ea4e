function H = ref_solid_harmonics(P, nterms)
%REF_SOLID_HARMONICS  The built-in solid harmonics of MODEL.md, N x nterms, in plain .m.
x = P(:, 1); y = P(:, 2); z = P(:, 3); r2 = x.^2 + y.^2 + z.^2;
all = [ones(size(x)), x, y, z, x.*y, z.*y, 3*z.^2 - r2, x.*z, x.^2 - y.^2, ...
       3*y.*x.^2 - y.^3, x.*y.*z, (5*z.^2 - r2).*y, 5*z.^3 - 3*z.*r2, ...
       (5*z.^2 - r2).*x, z.*(x.^2 - y.^2), x.^3 - 3*x.*y.^2];
H = all(:, 1:nterms);
end
