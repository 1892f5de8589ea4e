function y = reference(refDims, fov, center, P, rho, S, w, echoTimes, weight)
%horecon.sim.reference  Simulated Cartesian reference k-space (prod(refDims) x L*E, echo
%   slowest: reshape to [prod(refDims) L E]) of an object rho (n x 1) at positions P
%   (n x 3) with sensitivities S (n x L), off-resonance w (n x 1 rad/s, or []) and echo
%   times (s): the exact sum times weight (1/f^d for an f-times finer grid), no noise.
y = horecon_mex('simReference', refDims, fov, center, P, rho, S, w, echoTimes, weight);
end
