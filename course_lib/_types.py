"""Type aliases shared by the public API (annotations only; nothing here is checked at run time).

Shapes are jaxtyping strings with the names the docstrings use: ``nx`` states, ``nu`` inputs,
``N`` steps, ``np`` parameters, ``nc`` contacts, ``n`` a generic size. A string of the form
``" nx"`` (leading space) is jaxtyping's way of writing a one-axis shape. To a type checker
``Float[Array, "..."]`` is just ``jax.Array``; the shape is documentation that a reader (and
jaxtyping's optional run-time checker, not used here) can read.
"""

from __future__ import annotations

from typing import Any, Callable, TypeAlias

import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PyTree, Shaped

__all__ = [
    "Array",
    "ArrayLike",
    "Bool",
    "Float",
    "Int",
    "PyTree",
    "Shaped",
    "Params",
    "State",
    "Control",
    "States",
    "Controls",
    "Scalar",
    "ScalarLike",
    "IntScalar",
    "Key",
    "Dynamics",
    "Step",
    "StageCost",
    "TerminalCost",
    "Energy",
    "LossFn",
    "ContactLaw",
]

#: A parameter pytree (usually a NamedTuple of floats); any pytree of arrays works.
Params: TypeAlias = Any
#: A state vector ``x``.
State: TypeAlias = Float[Array, " nx"]
#: An input vector ``u``.
Control: TypeAlias = Float[Array, " nu"]
#: A trajectory ``xs`` (``xs[0] = x0``).
States: TypeAlias = Float[Array, "N+1 nx"]
#: An input sequence ``us``.
Controls: TypeAlias = Float[Array, "N nu"]
#: A float scalar (0-d array).
Scalar: TypeAlias = Float[Array, ""]
#: A float scalar as given by a caller: a Python float (or int), a NumPy or a JAX 0-d array.
ScalarLike: TypeAlias = float | Float[Array, ""] | Float[np.ndarray, ""]
#: An integer scalar (0-d array).
IntScalar: TypeAlias = Int[Array, ""]
#: A PRNG key (``jax.random.PRNGKey`` or ``jax.random.key``).
Key: TypeAlias = Array

#: Continuous model ``f(x, u, p) -> xdot``.
Dynamics: TypeAlias = Callable[[State, Control, Params], State]
#: Discrete step ``step(x, u, p) -> x_next`` (an integrator applied to a model).
Step: TypeAlias = Callable[[State, Control, Params], State]
#: Stage cost ``ell(x, u, p) -> scalar``.
StageCost: TypeAlias = Callable[[State, Control, Params], Scalar]
#: Terminal cost ``ell_N(x, p) -> scalar``.
TerminalCost: TypeAlias = Callable[[State, Params], Scalar]
#: Energy ``energy(x, p) -> scalar``.
Energy: TypeAlias = Callable[[State, Params], Scalar]
#: Scalar loss of a parameter pytree ``L(theta) -> scalar``.
LossFn: TypeAlias = Callable[[PyTree], Scalar]
#: Normal-force law ``law(phi, phi_dot, params) -> lambda_n`` (any shape, elementwise).
ContactLaw: TypeAlias = Callable[[Array, Array, Any], Array]
