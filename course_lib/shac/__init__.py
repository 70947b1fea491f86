r"""Short-horizon actor-critic policy optimisation, SHAC style (S04.7.5–S04.7.8, S04.9.5 ex. 3).

A long episode of :math:`H` steps is cut into windows of :math:`h` steps. In each window the
policy is rolled out through the differentiable simulator and the loss

.. math:: L_h(\theta) = \frac1B\sum_{b=1}^B\Big[\sum_{k=0}^{h-1}\gamma^k c(x_k^b, u_k^b) + \gamma^h V_\psi(x_h^b)\Big],
          \qquad u_k = \pi_\theta(x_k),

is differentiated with respect to the policy parameters :math:`\theta`. The window's start
state is a constant (``stop_gradient``): gradients never cross a window boundary, so a
Jacobian product has at most :math:`h` factors. The critic :math:`V_\psi` (a cost-to-go,
since the library minimises) is also held constant in :math:`L_h`. The windows of one
episode are stored; after the episode's last window the critic is fitted by ridge regression
to the episode's λ-returns (:math:`T` = the episode's last step)

.. math:: G_T = V_\psi(x_T),\qquad G_k = c_k + \gamma\big[(1-\lambda)V_\psi(x_{k+1}) + \lambda G_{k+1}\big]

(:math:`\lambda = 1`: the observed discounted costs-to-go, bootstrapped once, at the episode
end) and blended into the old one, :math:`\psi \leftarrow (1-\tau)\psi + \tau\psi_{\text{fit}}`.
Fitting once per episode rather than once per window matters: a quadratic critic fitted to
one short window and bootstrapped at that window's end extrapolates, and the bootstrap
feeds the extrapolation back until the critic diverges.
The policy step clips the gradient with ``optax.clip_by_global_norm`` before Adam, so a
contact spike cannot throw the parameters away, and every iteration writes a
:class:`~course_lib.health.TrainingHealth` record (loss terms, gradient norm *before*
clipping, contact count, maximum penetration, update size).

Conventions: a policy is ``policy(params, x) -> u`` with a pytree of parameters
(:func:`~course_lib.shac.critic.init_mlp`/:func:`~course_lib.shac.critic.mlp_policy`: a plain-JAX MLP, a
linear map when it has no hidden layer). A critic is linear in features, :math:`V_\psi(x) = \psi^T\phi(x)`
(:func:`~course_lib.shac.critic.quadratic_features` by default), so its fit is one linear solve. A task is a
:class:`~course_lib.shac.tasks.ShacTask`; :func:`~course_lib.shac.tasks.wall_task` builds the toy task with a
stiff soft contact.

One family per module; this package holds no code (the public names are imported from :mod:`course_lib`):

* :mod:`course_lib.shac.tasks`: the task description and the stiff-wall toy task;
* :mod:`course_lib.shac.critic`: the policy and the feature-linear critic, its ridge fit and the λ-returns;
* :mod:`course_lib.shac.window`: the window loss :math:`L_h` and the cost of a full episode;
* :mod:`course_lib.shac.train`: :func:`~course_lib.shac.train.shac_train`, the training loop above.
"""
