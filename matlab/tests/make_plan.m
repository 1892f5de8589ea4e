function p = make_plan(pr, varargin)
%MAKE_PLAN  A horecon.Plan for a random_problem.
p = horecon.Plan(pr.dims, pr.L, pr.M, varargin{:});
p.setPositions(pr.P);
p.setSolidHarmonics(pr.coef);
if ~isempty(pr.w)
  p.setOffResonance(pr.w, pr.t);
end
p.setSensitivities(pr.S);
end
