function w = offResonance(P, fov, center, maxHz)
%horecon.sim.offResonance  Smooth off-resonance map (rad/s) peaking at about maxHz.
w = horecon_mex('simOffResonance', P, fov, center, maxHz);
end
