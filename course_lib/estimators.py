r"""Batched gradient estimators for a Gaussian-smoothed objective (S04.4.3, S04.4.5).

The smoothed objective of a loss :math:`L` is

.. math:: F(\theta) = \mathbb{E}_{w\sim\mathcal N(0,\sigma^2 I)}\left[L(\theta + w)\right].

Following Suh et al. (ICML 2022, "Do differentiable simulators give better policy
gradients?"), its gradient is estimated from :math:`N` samples :math:`w_i` in three ways:

.. math::
    \bar g^{[1]} &= \frac1N\sum_i \nabla L(\theta + w_i)
        &&\text{first-order batched gradient (FoBG)}\\
    \bar g^{[0]} &= \frac1N\sum_i \frac{\big(L(\theta + w_i) - L(\theta)\big)\,w_i}{\sigma^2}
        &&\text{zeroth-order batched gradient (ZoBG), with the baseline } L(\theta)\\
    \bar g^{[\alpha]} &= \alpha\,\bar g^{[1]} + (1-\alpha)\,\bar g^{[0]}
        &&\alpha\text{-order batched gradient (AoBG)}

ZoBG is unbiased for :math:`\nabla F` whenever :math:`F` exists (Stein's identity), even for
a discontinuous :math:`L`. FoBG is unbiased only when gradient and expectation may be
exchanged: for the Heaviside step :math:`H` it is exactly zero although
:math:`\nabla F(\theta) = \varphi(\theta/\sigma)/\sigma`. That is the bias of S04.4.5: a
differentiable simulator sees the derivative inside a contact mode, never the motion of
the mode boundary.

How to mix the two: :func:`adaptive_aobg` chooses α as Suh et al. do (least variance subject to
a bias bound certified by a Bernstein confidence width on independent draws, with δ a failure
probability), and :func:`ivw_aobg` weights each component by inverse variance without a bias guard
(the variance control Onoda et al. 2026, arXiv:2604.18161, find dominant in practice).

Every estimator evaluates the batch with ``vmap``, takes an explicit PRNG ``key`` and
returns the estimate together with its per-component sample standard error
:math:`s_j/\sqrt N` (:math:`s_j` the sample standard deviation of the per-sample terms).
``theta`` may be an array of any shape or a pytree of arrays; ``grad`` and ``stderr``
have its structure. All functions work under ``jit`` and ``vmap`` (``n_samples`` is
static); the sign and range checks run only on concrete (non-traced) inputs.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from course_lib._types import Array, Float, Key, LossFn, PyTree, Scalar, ScalarLike
from course_lib._validate import check_values


class GradientEstimate(NamedTuple):
    """Result of a batched gradient estimator.

    Attributes:
        grad: the estimate of :math:`\\nabla F(\\theta)`, same structure as ``theta``.
        stderr: per-component sample standard error of ``grad``, same structure as ``theta``.
        alpha: weight of the first-order part, scalar (1 for FoBG, 0 for ZoBG); for
            :func:`ivw_aobg` one weight per component, with the structure of ``theta``.
    """

    grad: PyTree
    stderr: PyTree
    alpha: Scalar | PyTree


class GradientSamples(NamedTuple):
    """The per-sample terms the estimators average (flattened ``theta`` of size ``n``).

    Attributes:
        noise: perturbations :math:`w_i`, shape ``(N, n)``.
        values: :math:`L(\\theta + w_i)`, shape ``(N,)``.
        baseline: :math:`L(\\theta)`, scalar.
        first_order: :math:`\\nabla L(\\theta + w_i)`, shape ``(N, n)``; ``None`` in a values-only draw
            (the zeroth-order draw of :func:`adaptive_aobg`).
        zeroth_order: :math:`(L(\\theta + w_i) - L(\\theta))\\,w_i/\\sigma^2`, shape ``(N, n)``.
    """

    noise: Float[Array, "N n"]
    values: Float[Array, " N"]
    baseline: Scalar
    first_order: Float[Array, "N n"] | None
    zeroth_order: Float[Array, "N n"]


# --- checks -------------------------------------------------------------------------------


def _check_sigma(sigma, owner):
    """``sigma``, checked to be a positive finite scalar (at once, or when the compiled program runs)."""
    if jnp.ndim(sigma) != 0:
        raise ValueError(f"{owner}: sigma must be a scalar, got shape {jnp.shape(sigma)}")
    message = f"{owner}: sigma (the smoothing standard deviation) must be positive and finite"
    return check_values(sigma, lambda a: (a > 0) & (a < np.inf), message)


def _check_n_samples(n_samples, owner):
    if not isinstance(n_samples, (int, np.integer)) or isinstance(n_samples, bool) or n_samples < 2:
        raise ValueError(
            f"{owner}: n_samples must be a Python int >= 2 (a standard error needs two samples), got {n_samples!r}"
        )


def _check_alpha(alpha, owner):
    """``alpha``, checked to lie in [0, 1]."""
    if jnp.ndim(alpha) != 0:
        raise ValueError(f"{owner}: alpha must be a scalar, got shape {jnp.shape(alpha)}")
    return check_values(alpha, lambda a: (a >= 0) & (a <= 1), f"{owner}: alpha must lie in [0, 1]")


def _check_gamma_delta(gamma, delta, owner):
    """``(gamma, delta)``, checked: gamma in (0, inf), delta (a failure probability) in (0, 1)."""
    checked = []
    for name, value, low, high in (("gamma", gamma, 0.0, np.inf), ("delta", delta, 0.0, 1.0)):
        if jnp.ndim(value) != 0:
            raise ValueError(f"{owner}: {name} must be a scalar, got shape {jnp.shape(value)}")
        ok = lambda a, low=low, high=high: (a > low) & (a < high)  # noqa: E731  (NaN fails both)
        checked.append(check_values(value, ok, f"{owner}: {name} must lie in ({low}, {high})"))
    return tuple(checked)


def _check_key(key, owner):
    shape = jnp.shape(key)
    # jax.dtypes.issubdtype is public (it handles key dtypes), but jax/dtypes.py re-exports it without `as`
    typed = hasattr(key, "dtype") and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)  # pyright: ignore[reportPrivateImportUsage]
    if shape != (() if typed else (2,)):
        raise ValueError(f"{owner}: key must be one PRNG key (jax.random.key or PRNGKey), got shape {shape}")


def _flat_loss(loss_fn, theta, owner):
    flat, unravel = ravel_pytree(theta)
    if flat.size == 0:
        raise ValueError(f"{owner}: theta has no entries")
    if not jnp.issubdtype(flat.dtype, jnp.floating):
        raise ValueError(f"{owner}: theta must hold floating-point arrays, got dtype {flat.dtype}")

    def flat_fn(t):
        return loss_fn(unravel(t))

    out = jax.eval_shape(flat_fn, flat)
    if out.shape != ():
        raise ValueError(f"{owner}: loss_fn must return a scalar, got shape {out.shape}")
    return flat, unravel, flat_fn


def _first_order(samples: GradientSamples, owner: str) -> Float[Array, "N n"]:
    """``samples.first_order``; a values-only draw has none (``TypeError``, as ``jnp`` would raise on ``None``)."""
    if samples.first_order is None:
        raise TypeError(f"{owner}: these samples have no first-order terms (a values-only draw)")
    return samples.first_order


def _mean_stderr(samples):
    n = samples.shape[0]
    return jnp.mean(samples, axis=0), jnp.std(samples, axis=0, ddof=1) / jnp.sqrt(n)


def _validated(loss_fn, theta, key, sigma, n_samples, owner):
    """``(flat, unravel, flat_fn, sigma)``: the flattened problem and the checked ``sigma``."""
    sigma = _check_sigma(sigma, owner)
    _check_n_samples(n_samples, owner)
    _check_key(key, owner)
    return (*_flat_loss(loss_fn, theta, owner), sigma)


_Draw = tuple[Float[Array, "N n"], Float[Array, " N"], Scalar, Float[Array, "N n"], Float[Array, "N n"]]
_ValuesDraw = tuple[Float[Array, "N n"], Float[Array, " N"], Scalar, None, Float[Array, "N n"]]


@overload
def _draw(flat_fn, flat, key, sigma, n_samples: int, need_grad: Literal[True]) -> _Draw: ...
@overload
def _draw(flat_fn, flat, key, sigma, n_samples: int, need_grad: Literal[False]) -> _ValuesDraw: ...
def _draw(flat_fn, flat, key, sigma, n_samples: int, need_grad: bool) -> _Draw | _ValuesDraw:
    sigma = jnp.asarray(sigma, flat.dtype)
    noise = sigma * jax.random.normal(key, (n_samples, flat.shape[0]), flat.dtype)
    if need_grad:
        values, grads = jax.vmap(jax.value_and_grad(flat_fn))(flat + noise)
    else:
        values, grads = jax.vmap(flat_fn)(flat + noise), None
    baseline = flat_fn(flat)
    zeroth = (values - baseline)[:, None] * noise / sigma**2
    return noise, values, baseline, grads, zeroth


# --- public API ---------------------------------------------------------------------------


def gradient_samples(loss_fn: LossFn, theta: PyTree, key: Key, *, sigma: ScalarLike, n_samples: int) -> GradientSamples:
    r"""Draw :math:`w_i\sim\mathcal N(0,\sigma^2 I)` and return the per-sample terms of FoBG and ZoBG.

    Both estimators below average these rows; returning them lets a reader plot the
    per-sample spread (the variance half of Suh et al.'s bias–variance story).

    Args:
        loss_fn: ``L(theta) -> scalar``, traceable by JAX (and differentiable for the first-order terms).
        theta: point of evaluation, array or pytree (flattened to ``n`` entries).
        key: PRNG key.
        sigma: smoothing standard deviation :math:`\sigma > 0`.
        n_samples: batch size :math:`N \ge 2` (static).

    Returns:
        :class:`GradientSamples` with flattened ``(N, n)`` rows.
    """
    owner = "gradient_samples"
    flat, _, flat_fn, sigma = _validated(loss_fn, theta, key, sigma, n_samples, owner)
    noise, values, baseline, grads, zeroth = _draw(flat_fn, flat, key, sigma, n_samples, True)
    return GradientSamples(noise, values, baseline, grads, zeroth)


def fobg(loss_fn: LossFn, theta: PyTree, key: Key, *, sigma: ScalarLike, n_samples: int) -> GradientEstimate:
    r"""First-order batched gradient :math:`\bar g^{[1]} = \frac1N\sum_i\nabla L(\theta + w_i)` (S04.4.5).

    Low variance where :math:`L` is smooth; biased where :math:`L` jumps (zero for a step).

    Args:
        loss_fn: differentiable ``L(theta) -> scalar``.
        theta: array or pytree.
        key: PRNG key.
        sigma: smoothing standard deviation, :math:`\sigma > 0`.
        n_samples: :math:`N \ge 2` (static).

    Returns:
        :class:`GradientEstimate` with ``alpha = 1``.
    """
    owner = "fobg"
    flat, unravel, flat_fn, sigma = _validated(loss_fn, theta, key, sigma, n_samples, owner)
    _, _, _, grads, _ = _draw(flat_fn, flat, key, sigma, n_samples, True)
    mean, se = _mean_stderr(grads)
    return GradientEstimate(unravel(mean), unravel(se), jnp.ones((), flat.dtype))


def zobg(loss_fn: LossFn, theta: PyTree, key: Key, *, sigma: ScalarLike, n_samples: int) -> GradientEstimate:
    r"""Zeroth-order batched gradient with baseline (Gaussian smoothing, S04.4.5).

    .. math:: \bar g^{[0]} = \frac1N\sum_i \frac{\big(L(\theta+w_i) - L(\theta)\big)\,w_i}{\sigma^2}

    Unbiased for :math:`\nabla F` even when :math:`L` is discontinuous; its variance grows
    like :math:`n/\sigma^2` with the dimension ``n``. Only loss values are used.

    Args:
        loss_fn: ``L(theta) -> scalar`` (need not be differentiable).
        theta: array or pytree.
        key: PRNG key.
        sigma: smoothing standard deviation, :math:`\sigma > 0`.
        n_samples: :math:`N \ge 2` (static).

    Returns:
        :class:`GradientEstimate` with ``alpha = 0``.
    """
    owner = "zobg"
    flat, unravel, flat_fn, sigma = _validated(loss_fn, theta, key, sigma, n_samples, owner)
    _, _, _, _, zeroth = _draw(flat_fn, flat, key, sigma, n_samples, False)
    mean, se = _mean_stderr(zeroth)
    return GradientEstimate(unravel(mean), unravel(se), jnp.zeros((), flat.dtype))


def aobg(
    loss_fn: LossFn, theta: PyTree, key: Key, *, sigma: ScalarLike, n_samples: int, alpha: ScalarLike
) -> GradientEstimate:
    r"""α-order batched gradient :math:`\alpha\,\bar g^{[1]} + (1-\alpha)\,\bar g^{[0]}` on shared samples.

    The standard error is that of the per-sample combination
    :math:`\alpha\nabla L(\theta+w_i) + (1-\alpha)(L(\theta+w_i)-L(\theta))w_i/\sigma^2`,
    so the correlation between the two parts is accounted for.

    Args:
        loss_fn: differentiable ``L(theta) -> scalar``.
        theta: array or pytree.
        key: PRNG key.
        sigma: smoothing standard deviation, :math:`\sigma > 0`.
        n_samples: :math:`N \ge 2` (static).
        alpha: weight :math:`\alpha\in[0, 1]` of the first-order part.

    Returns:
        :class:`GradientEstimate`.
    """
    owner = "aobg"
    alpha = _check_alpha(alpha, owner)
    flat, unravel, flat_fn, sigma = _validated(loss_fn, theta, key, sigma, n_samples, owner)
    _, _, _, grads, zeroth = _draw(flat_fn, flat, key, sigma, n_samples, True)
    alpha = jnp.asarray(alpha, flat.dtype)
    mean, se = _mean_stderr(alpha * grads + (1 - alpha) * zeroth)
    return GradientEstimate(unravel(mean), unravel(se), alpha)


#: confidence widths :func:`adaptive_alpha` can use (see :func:`confidence_width`)
WIDTHS = ("bernstein", "chebyshev")


def confidence_width(
    total_variance: ScalarLike,
    n_samples: int,
    *,
    delta: ScalarLike,
    dim: int = 1,
    bound: ScalarLike | None = None,
    rule: str = "bernstein",
) -> Scalar:
    r"""Half-width :math:`\varepsilon` with :math:`P(\|\bar g - \mathbb E\,\bar g\| > \varepsilon) \le \delta`.

    For the mean :math:`\bar g` of :math:`N` independent samples in :math:`\mathbb R^d` with total
    variance :math:`\sigma^2 = \mathbb E\|g_i - \mathbb E g\|^2` (trace of the covariance):

    * ``"bernstein"`` (Suh et al. 2022, their code's ``compute_confidence_interval``): the vector
      Bernstein inequality with :math:`\|g_i - \mathbb E g\| \le L` almost surely,
      :math:`P(\|\bar g-\mathbb E\bar g\|\ge\varepsilon)\le(d+1)\exp\!\big(-\tfrac{N\varepsilon^2/2}{\sigma^2+L\varepsilon/3}\big)`,
      solved for :math:`\varepsilon` and bounded above by

      .. math:: \varepsilon = \sqrt{\frac{2\sigma^2\ln((d+1)/\delta)}{N}} + \frac{2L}{3N}\ln\frac{d+1}{\delta};

    * ``"chebyshev"``: :math:`\varepsilon = \sqrt{\sigma^2/(N\delta)}` (needs no bound :math:`L`, but is
      wide for small :math:`\delta`).

    Args:
        total_variance: :math:`\sigma^2 \ge 0`, scalar.
        n_samples: :math:`N`.
        delta: failure probability :math:`\delta\in(0, 1)` (not a confidence level: 0.05, not 0.95).
        dim: :math:`d`, the dimension of one sample (Bernstein only).
        bound: :math:`L` (Bernstein only), scalar.
        rule: ``"bernstein"`` or ``"chebyshev"``.

    Returns:
        :math:`\varepsilon`, scalar.
    """
    if rule not in WIDTHS:
        raise ValueError(f"confidence_width: rule must be one of {WIDTHS}, got {rule!r}")
    if rule == "chebyshev":
        return jnp.sqrt(total_variance / (n_samples * delta))
    if bound is None:
        raise ValueError("confidence_width: the Bernstein width needs the bound L of |g_i - E g|")
    log_term = jnp.log((dim + 1) / delta)
    return jnp.sqrt(2.0 * total_variance * log_term / n_samples) + 2.0 * bound * log_term / (3.0 * n_samples)


def adaptive_alpha(
    samples: GradientSamples,
    zeroth: GradientSamples | None = None,
    *,
    gamma: ScalarLike,
    delta: ScalarLike = 0.05,
    width: str = "bernstein",
    bound: ScalarLike | None = None,
) -> Scalar:
    r"""Suh et al.'s choice of α: least variance subject to a bias bound (their ``bias_constrained_aobg``).

    With the empirical total variances :math:`\hat\sigma_1^2,\ \hat\sigma_0^2` (trace of the
    sample covariance of the first- and zeroth-order terms), the variance-minimising weight of two
    independent means is :math:`\alpha^* = \hat\sigma_0^2/(\hat\sigma_0^2 + \hat\sigma_1^2)`. ZoBG is
    unbiased, so :math:`\|\bar g^{[0]} - \nabla F\| \le \varepsilon` with probability at least
    :math:`1-\delta` (:func:`confidence_width`), and

    .. math:: \|\bar g^{[\alpha]} - \nabla F\| \le \alpha\,B + \varepsilon,\qquad B = \|\bar g^{[1]} - \bar g^{[0]}\|.

    The robustness check keeps this bound below :math:`\gamma`:

    .. math::
        \alpha = \begin{cases}
            0 & \varepsilon > \gamma \ \text{(cannot certify: fall back to ZoBG)}\\
            \alpha^* & \alpha^* B \le \gamma - \varepsilon\\
            (\gamma - \varepsilon)/B & \text{otherwise.}
        \end{cases}

    A large gap :math:`B` between the two estimates (a discontinuity or a stiff contact
    inside the smoothing radius) thus pushes α towards 0.

    As in the authors' code, the first- and zeroth-order means should come from independent
    samples: pass the zeroth-order draw as ``zeroth`` (:func:`adaptive_aobg` does). With
    ``zeroth=None`` both come from ``samples`` (shared noise; the variance formula for α* then
    ignores their correlation).

    Args:
        samples: from :func:`gradient_samples`; its first-order terms (and zeroth-order ones if
            ``zeroth`` is None) are used.
        zeroth: an independent draw from :func:`gradient_samples` for the zeroth-order terms.
        gamma: tolerated error :math:`\gamma > 0` of the combined estimate (same units as the gradient).
        delta: failure probability :math:`\delta\in(0, 1)` of the confidence bound.
        width: ``"bernstein"`` (the authors' rule, default) or ``"chebyshev"``.
        bound: :math:`L` of the Bernstein width, a bound on :math:`\|g^{[0]}_i - \mathbb E g^{[0]}\|`. The
            authors pass a constant (``L=10`` by default); ``None`` uses the largest observed deviation
            :math:`\max_i\|g^{[0]}_i - \bar g^{[0]}\|`, a plug-in value, not a guarantee.

    Returns:
        α, scalar in ``[0, 1]``.
    """
    gamma, delta = _check_gamma_delta(gamma, delta, "adaptive_alpha")
    g1 = _first_order(samples, "adaptive_alpha")
    g0 = (samples if zeroth is None else zeroth).zeroth_order
    n0, dim = g0.shape
    mean0 = jnp.mean(g0, axis=0)
    var1 = jnp.sum(jnp.var(g1, axis=0, ddof=1))
    var0 = jnp.sum(jnp.var(g0, axis=0, ddof=1))
    total = var0 + var1
    alpha_star = jnp.where(total > 0, var0 / jnp.where(total > 0, total, 1.0), 1.0)
    if width == "bernstein" and bound is None:
        bound = jnp.max(jnp.linalg.norm(g0 - mean0, axis=1))
    eps = confidence_width(var0, n0, delta=delta, dim=dim, bound=bound, rule=width)
    gap = jnp.linalg.norm(jnp.mean(g1, axis=0) - mean0)
    room = gamma - eps
    capped = jnp.where(gap > 0, room / jnp.where(gap > 0, gap, 1.0), 1.0)
    alpha = jnp.where(room < 0, 0.0, jnp.where(alpha_star * gap <= room, alpha_star, capped))
    return jnp.clip(alpha, 0.0, 1.0).astype(g1.dtype)


def _independent_draws(flat_fn, flat, key, sigma, n_samples):
    """Two independent draws (``key`` split): one with gradients for FoBG, one of values only for ZoBG."""
    key_first, key_zeroth = jax.random.split(key)
    first = GradientSamples(*_draw(flat_fn, flat, key_first, sigma, n_samples, True))
    zeroth = GradientSamples(*_draw(flat_fn, flat, key_zeroth, sigma, n_samples, False))
    return first, zeroth


def _combined(alpha, first_order, zeroth_order):
    """Mean and standard error of ``alpha * mean(first) + (1 - alpha) * mean(zeroth)`` from independent draws."""
    m1, se1 = _mean_stderr(first_order)
    m0, se0 = _mean_stderr(zeroth_order)
    return alpha * m1 + (1 - alpha) * m0, jnp.sqrt((alpha * se1) ** 2 + ((1 - alpha) * se0) ** 2)


def adaptive_aobg(
    loss_fn: LossFn,
    theta: PyTree,
    key: Key,
    *,
    sigma: ScalarLike,
    n_samples: int,
    gamma: ScalarLike,
    delta: ScalarLike = 0.05,
    width: str = "bernstein",
    bound: ScalarLike | None = None,
) -> GradientEstimate:
    r"""α-order batched gradient with α from :func:`adaptive_alpha` (Suh et al. 2022).

    As in the authors' code, the first- and zeroth-order means come from two independent draws of
    ``n_samples`` each (``key`` is split), so the combined estimate costs :math:`2N` loss evaluations
    and :math:`N` gradients, and its standard error is
    :math:`\sqrt{\alpha^2 s_1^2 + (1-\alpha)^2 s_0^2}` per component.

    Args:
        loss_fn: differentiable ``L(theta) -> scalar``.
        theta: array or pytree.
        key: PRNG key.
        sigma: smoothing standard deviation, :math:`\sigma > 0`.
        n_samples: :math:`N \ge 2` per draw (static).
        gamma: tolerated error of the estimate, :math:`\gamma > 0`.
        delta: failure probability of the confidence bound, in ``(0, 1)``.
        width, bound: the confidence width of :func:`adaptive_alpha`.

    Returns:
        :class:`GradientEstimate` whose ``alpha`` is the chosen weight.
    """
    owner = "adaptive_aobg"
    gamma, delta = _check_gamma_delta(gamma, delta, owner)
    flat, unravel, flat_fn, sigma = _validated(loss_fn, theta, key, sigma, n_samples, owner)
    first, zeroth = _independent_draws(flat_fn, flat, key, sigma, n_samples)
    alpha = adaptive_alpha(first, zeroth, gamma=gamma, delta=delta, width=width, bound=bound)
    mean, se = _combined(alpha, _first_order(first, owner), zeroth.zeroth_order)
    return GradientEstimate(unravel(mean), unravel(se), alpha)


def ivw_aobg(loss_fn: LossFn, theta: PyTree, key: Key, *, sigma: ScalarLike, n_samples: int) -> GradientEstimate:
    r"""Inverse-variance-weighted combination of FoBG and ZoBG, component by component.

    With independent draws and per-component sample variances :math:`v_{1,j}, v_{0,j}`,

    .. math:: \alpha_j = \frac{v_{0,j}}{v_{0,j} + v_{1,j}},\qquad
        \hat g_j = \alpha_j\,\bar g^{[1]}_j + (1-\alpha_j)\,\bar g^{[0]}_j,

    the weights that minimise the variance of each component. This is the variance control that
    Onoda et al. (2026) apply per time step (their IVW-H); unlike :func:`adaptive_aobg` there is no
    bias guard, so where FoBG is biased (a step inside the smoothing radius, whose FoBG has zero
    variance) the estimate inherits that bias in full.

    Args:
        loss_fn: differentiable ``L(theta) -> scalar``.
        theta: array or pytree.
        key: PRNG key (split into the two draws).
        sigma: smoothing standard deviation, :math:`\sigma > 0`.
        n_samples: :math:`N \ge 2` per draw (static).

    Returns:
        :class:`GradientEstimate` whose ``alpha`` has the structure of ``theta`` (one weight per component).
    """
    owner = "ivw_aobg"
    flat, unravel, flat_fn, sigma = _validated(loss_fn, theta, key, sigma, n_samples, owner)
    first, zeroth = _independent_draws(flat_fn, flat, key, sigma, n_samples)
    g1 = _first_order(first, owner)
    v1 = jnp.var(g1, axis=0, ddof=1)
    v0 = jnp.var(zeroth.zeroth_order, axis=0, ddof=1)
    total = v0 + v1
    alpha = jnp.where(total > 0, v0 / jnp.where(total > 0, total, 1.0), 0.5)
    mean, se = _combined(alpha, g1, zeroth.zeroth_order)
    return GradientEstimate(unravel(mean), unravel(se), unravel(alpha))
