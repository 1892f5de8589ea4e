function e = rel_error(x, ref)
%REL_ERROR  norm(x - ref) / norm(ref) over all elements, in double.
e = norm(double(x(:)) - double(ref(:))) / norm(double(ref(:)));
end
