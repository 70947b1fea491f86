r"""Contact laws: soft (penalty, softplus), hard (complementarity, time of impact) and relaxed (S04.4–S04.5).

Three families, one module each; every function is a pure formula that works under ``jit``, ``vmap``
and ``grad``. This package holds no code: the public names are imported from :mod:`course_lib`
(``cl.solve_contact``, ...), and the modules named below are where they are defined.

1. **Force laws** (S04.5.1), :mod:`course_lib.contact.laws`. A gap :math:`\phi` (negative = penetration)
   and its rate :math:`\dot\phi` give a normal force :math:`\lambda_n`. The four laws differ only in which
   of the two non-smooth boundaries of the penalty law they smooth:

   * ``"penalty"``: :math:`\lambda_n = \max(0, k d + c\dot d)`, :math:`d = \max(0, -\phi)`;
     kinks at the contact onset :math:`\phi = 0` and at the force clamp :math:`kd + c\dot d = 0`.
   * ``"softplus_clamp"``: :math:`\lambda_n = \mathrm{sp}_\beta(k d + c\dot d)`, :math:`d = \max(0, -\phi)`;
     the clamp is smooth, the onset keeps its kink.
   * ``"softplus_penetration"``: :math:`\lambda_n = \max(0, k d + c\dot d)`, :math:`d = \mathrm{sp}_\beta(-\phi)`;
     the onset is smooth, the clamp keeps its kink.
   * ``"softplus_both"``: :math:`\lambda_n = \mathrm{sp}_{\beta_f}(k d + c\dot d)`, :math:`d = \mathrm{sp}_{\beta_g}(-\phi)`;
     both smooth.

   with :math:`\mathrm{sp}_\beta(z) = \log(1+e^{\beta z})/\beta` and :math:`\dot d = \partial d/\partial t`.
   All four share the signature ``law(phi, phi_dot, params: ContactParams) -> lambda_n`` and sit in
   one table, :data:`~course_lib.contact.laws.CONTACT_LAWS`; :func:`~course_lib.contact.laws.get_contact_law`
   looks one up by name. The formulas themselves (:func:`~course_lib.contact.laws.penalty_force`, ...) take
   explicit scalars and stay apart from that wiring. The same module holds the smooth building blocks
   (:func:`~course_lib.contact.laws.softplus`, :func:`~course_lib.contact.laws.heaviside_step`,
   :func:`~course_lib.contact.laws.sigmoid_step`, :func:`~course_lib.contact.laws.relaxed_complementarity`)
   and the smoothed ``max(0, x)`` and ``clip`` that the relaxed solver of family 2 reuses.

2. **Complementarity** (S04.4.2, S04.5.3–S04.5.5), :mod:`course_lib.contact.complementarity`:
   :func:`~course_lib.contact.complementarity.solve_contact` solves the
   velocity-level contact problem of one time step (normal non-penetration plus Coulomb friction
   in a box :math:`|\lambda_t|\le\mu\lambda_n`, one tangent per contact, i.e. the planar friction
   "pyramid") by projected Gauss–Seidel with a fixed number of sweeps, and differentiates the
   solution with the implicit function theorem at the solution (one linear solve). With
   ``kappa > 0`` it solves the interior-point relaxation instead;
   :func:`~course_lib.contact.laws.relaxed_complementarity` is the scalar closed form.
   :func:`~course_lib.contact.complementarity.complementarity_step` wires the solver into a
   Stewart–Trinkle/Anitescu time step :math:`v^+ = v + M^{-1}(hf + J^T\lambda)`.

3. **Hard impact** (S04.4.1), :mod:`course_lib.contact.impact`: :func:`~course_lib.contact.impact.impact_step`
   integrates the 1-D ball exactly, locating the impact *inside* the step;
   :func:`~course_lib.contact.impact.naive_impact_step` is the "step, then flip the velocity"
   variant, kept only to show what it gets wrong.

The solver and the impact step cannot share the force-law signature (they return impulses or a
next state, not a force), so they live beside :data:`~course_lib.contact.laws.CONTACT_LAWS`, in modules of
their own, not in it.

Values are checked when concrete (outside ``jit``/``vmap``/``grad``): negative stiffness,
damping or friction coefficient, :math:`\beta\le0`, :math:`\alpha\le0`, :math:`\kappa\le0` in
:func:`~course_lib.contact.laws.relaxed_complementarity` (:math:`\kappa<0` in the solver, where 0 means hard
contact) and a restitution outside :math:`[0,1]` raise ``ValueError`` (the checks are shared, in
:mod:`course_lib._validate`).
"""
