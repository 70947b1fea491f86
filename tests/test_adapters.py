"""The grader owns what it counts: course_check.adapters against the shortcuts that skip a counted concept.

Each student function here is defined in its own module namespace (as a notebook's functions share the
kernel's globals), so the adapters rebind the names it calls exactly as they do in a grading kernel.
Float64 throughout (``cl.enable_float64``), as the notebooks run.
"""

import math
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import course_lib as cl
from course_check.adapters import (
    NO_CALLS,
    Opaque,
    complementarity,
    count_loss_calls,
    count_passes,
    watch_checkpoints,
)

cl.enable_float64()


def notebook(source: str, **names) -> dict:
    """A fresh module namespace holding ``names`` and the definitions in ``source`` (one notebook's globals)."""
    namespace = {"np": np, "jnp": jnp, "jax": jax, **names}
    exec(textwrap.dedent(source), namespace)
    return namespace


# --- s04_6_ex4: passes ---------------------------------------------------------------------------------------

PASSES_SETUP = """
PASSES = {"forward": 0, "reverse": 0}

def forward_pass(f, x, v):
    PASSES["forward"] += 1
    return jax.jvp(f, (jnp.asarray(x),), (jnp.asarray(v, dtype=jnp.float64),))[1]

def reverse_pass(f, x, w):
    PASSES["reverse"] += 1
    _, pullback = jax.vjp(f, jnp.asarray(x))
    return pullback(jnp.asarray(w, dtype=jnp.float64))[0]
"""


def make_map(n_steps, sample_steps):
    A = jnp.asarray(np.random.default_rng(int(n_steps)).normal(size=(len(sample_steps), 5)))
    return lambda z: jnp.tanh(A @ z)


HONEST = """
def jacobian_forward(f, x):
    basis = jnp.eye(x.shape[0])
    return np.asarray(jnp.stack([forward_pass(f, x, basis[j]) for j in range(x.shape[0])], axis=1))
"""

HAND_SET = """
def jacobian_forward(f, x):
    PASSES["forward"] += x.shape[0]
    return np.asarray(jax.jacfwd(f)(jnp.asarray(x)))
"""


def test_counted_passes_are_the_passes_made_and_the_notebooks_names_come_back():
    ns = notebook(PASSES_SETUP + HONEST)
    own_forward = ns["forward_pass"]
    x = np.linspace(-1.0, 1.0, 5)
    J, passes = count_passes(ns["jacobian_forward"], make_map, ns["forward_pass"], ns["reverse_pass"])(x, 3, [1, 2])
    np.testing.assert_allclose(J, jax.jacfwd(make_map(3, [1, 2]))(jnp.asarray(x)), rtol=1e-12)
    assert passes.tolist() == [5, 0]
    assert ns["forward_pass"] is own_forward and ns["PASSES"]["forward"] == 5  # the notebook's own pass ran


def test_a_hand_set_counter_with_jacfwd_gets_no_derivative_and_is_told_why():
    ns = notebook(PASSES_SETUP + HAND_SET)
    graded = count_passes(ns["jacobian_forward"], make_map, ns["forward_pass"], ns["reverse_pass"])
    with pytest.raises(TypeError, match="forward_pass and reverse_pass"):
        graded(np.ones(5), 3, [1, 2])
    assert "forward_pass" in ns and ns["forward_pass"].__name__ == "forward_pass"  # restored after the error


def test_an_opaque_map_evaluates_to_numpy():
    f = Opaque(make_map(2, [1]))
    assert isinstance(f(np.ones(5)), np.ndarray)


# --- s04_6_ex2: loss calls -----------------------------------------------------------------------------------

LOSS_SETUP = """
class CountedLoss:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0
    def __call__(self, u):
        self.calls += 1
        return float(self.fn(u))
    def reset(self):
        self.calls = 0

loss = CountedLoss(lambda u: float(np.sum(np.asarray(u) ** 2)))
raw_loss = lambda u: float(np.sum(np.asarray(u) ** 2))
"""


@pytest.mark.parametrize(
    ("body", "measured"),
    [
        pytest.param(
            "loss.calls = 0\n    rows = [loss(u + eps * d) - loss(u - eps * d) for d in directions]",
            10,
            id="reset-by-hand",
        ),
        pytest.param(
            "rows = [raw_loss(u + eps * d) - raw_loss(u - eps * d) for d in directions]\n    loss.calls += 10",
            NO_CALLS,
            id="count-set-by-hand",
        ),
        pytest.param("loss.reset()\n    rows = [loss(u + eps * d) - loss(u) for d in directions]", 10, id="reset"),
    ],
)
def test_the_loss_count_is_the_graders_whatever_the_student_writes_to_it(body, measured):
    ns = notebook(
        LOSS_SETUP + f"\ndef directional_checks(u, directions, eps):\n    {body}\n    return np.array(rows)\n"
    )
    rows, calls = count_loss_calls(ns["directional_checks"], ns["loss"])(np.ones(3), np.eye(5, 3), 1e-3)
    assert calls == measured and np.shape(rows) == (5,)


# --- s04_7_ex4: checkpoints ----------------------------------------------------------------------------------

CKPT_SETUP = """
def step(x, u):
    return jnp.asarray([x[0] + 0.05 * x[1], 0.98 * x[1] - 0.05 * jnp.sin(x[0]) + 0.05 * u[0]])

def stage_cost(x, u):
    return 0.5 * jnp.sum(x**2) + 0.05 * jnp.sum(u**2)

def segment_backward(x_start, us_seg, lam_end):
    x, lands, pullbacks = jnp.asarray(x_start), [], []
    for u in jnp.asarray(us_seg):
        x, pullback = jax.vjp(step, x, u)
        lands.append(x)
        pullbacks.append(pullback)
    lam, grads = jnp.asarray(lam_end), []
    for k in reversed(range(len(lands))):
        c_x, c_u = jax.grad(stage_cost, argnums=(0, 1))(lands[k], jnp.asarray(us_seg)[k])
        lam, g_u = pullbacks[k](lam + c_x)
        grads.append(g_u + c_u)
    return np.asarray(lam), np.asarray(jnp.stack(grads[::-1]))
"""

CHECKPOINTED = """
def checkpointed_value_and_grad(x0, us, s):
    starts = list(range(0, len(us), s))
    checkpoints, x, value = [], jnp.asarray(x0), 0.0
    for k in starts:
        checkpoints.append(x)
        for u in us[k : k + s]:
            x = step(x, u)
            value += float(stage_cost(x, u))
    lam, pieces = jnp.zeros(2), []
    for k, x_start in zip(starts[::-1], checkpoints[::-1]):
        lam, g = segment_backward(x_start, us[k : k + s], lam)
        pieces.append(g)
    return value, np.concatenate(pieces[::-1])
"""

STORE_ALL = """
def checkpointed_value_and_grad(x0, us, s):
    def total(us):
        x, cost = jnp.asarray(x0), 0.0
        for u in us:
            x = step(x, u)
            cost = cost + stage_cost(x, u)
        return cost
    value, grad = jax.value_and_grad(total)(jnp.asarray(us))
    return float(value), np.asarray(grad)
"""

EVERY_STATE_KEPT = """
def checkpointed_value_and_grad(x0, us, s):
    xs, value = [jnp.asarray(x0)], 0.0
    for u in us:
        xs.append(step(xs[-1], u))
        value += float(stage_cost(xs[-1], u))
    lam, pieces = jnp.zeros(2), []
    for k in list(range(0, len(us), s))[::-1]:
        lam, g = segment_backward(xs[k], us[k : k + s], lam)
        pieces.append(g)
    return value, np.concatenate(pieces[::-1])
"""

RECOMPUTED_PER_STEP = CHECKPOINTED.replace(
    "        lam, g = segment_backward(x_start, us[k : k + s], lam)",
    "        for j in range(len(us[k : k + s])):\n            y = x_start\n            for u in us[k : k + j]:\n"
    "                y = step(y, u)\n        lam, g = segment_backward(x_start, us[k : k + s], lam)",
)


@pytest.mark.parametrize(
    ("answer", "schedule"),
    [
        pytest.param(CHECKPOINTED, "ceil, 1, 1", id="checkpointed"),
        pytest.param(STORE_ALL, "0, 1, 1", id="store-all"),  # no segment_backward: the concept's points are lost
        pytest.param(EVERY_STATE_KEPT, "ceil, 1, 0", id="every-state-kept"),  # right segments, no memory saved
        pytest.param(RECOMPUTED_PER_STEP, "ceil, 0, 1", id="recomputed-per-step"),  # O(N s) steps
    ],
)
def test_the_checkpoint_schedule_is_what_the_grader_saw(answer, schedule):
    ns = notebook(CKPT_SETUP + answer)
    n, s = 37, 8
    us = np.random.default_rng(1).uniform(-1, 1, (n, 1))
    value, grad, segments, steps_ok, held_ok = watch_checkpoints(ns["checkpointed_value_and_grad"], ns["step"])(
        np.array([0.4, -0.2]), us, s
    )
    got = ", ".join(str(int(v)) for v in (segments, steps_ok, held_ok)).replace(str(math.ceil(n / s)), "ceil", 1)
    assert got == schedule
    assert grad.shape == (n, 1) and ns["step"].__name__ == "step"  # the notebook's step is back


def test_a_segment_called_twice_counts_no_segments():
    twice = CHECKPOINTED.replace(
        "        pieces.append(g)", "        segment_backward(x_start, us[k : k + s], lam)\n        pieces.append(g)"
    )
    ns = notebook(CKPT_SETUP + twice)
    out = watch_checkpoints(ns["checkpointed_value_and_grad"], ns["step"])(np.zeros(2), np.ones((9, 1)), 3)
    assert int(out[2]) == 0


# --- s04_5_ex4: complementarity ------------------------------------------------------------------------------


def test_a_solve_stopped_before_convergence_fails_the_complementarity_it_was_told_to_meet():
    W = np.array([[1.0, 0.95, 0.9], [0.95, 1.0, 0.95], [0.9, 0.95, 1.0]]) + 0.01 * np.eye(3)
    z_true = np.array([0.5, 0.3, 0.7])
    w0 = -W @ z_true

    def pgs(W, w0, sweeps):
        z = np.zeros(3)
        for _ in range(sweeps):
            for i in range(3):
                z[i] = max(0.0, z[i] - (W[i] @ z + w0[i]) / W[i, i])
        return z

    assert int(complementarity(lambda W, w0: np.linalg.solve(W, -w0))(W, w0)[1]) == 1
    assert int(complementarity(lambda W, w0: pgs(W, w0, 30))(W, w0)[1]) == 0
    assert int(complementarity(lambda W, w0: "no array")(W, w0)[1]) == 0


# --- s04_2_ex1, s04_6_ex1, s04_7_ex1: derivatives asked by hand ----------------------------------------------

BY_HAND_SETUP = """
def f(x):
    return jnp.stack([x[0] * x[1], jnp.sin(x[0])])
"""
HAND_DERIVED = """
def jacobian(x):
    x1, x2 = float(x[0]), float(x[1])
    return np.array([[x2, x1], [np.cos(x1), 0.0]])
"""
#: each way to let JAX differentiate, and the transform the feedback must name
AUTODIFF_ANSWERS = {  # the line the feedback must point at ends in "# here"
    "jax.jacfwd": "def jacobian(x):\n    return jax.jacfwd(f)(jnp.asarray(x))  # here\n",
    "jax.jacrev": "from jax import jacrev as J\ndef jacobian(x):\n    return J(f)(jnp.asarray(x))  # here\n",
    "jax.jacobian": "def jacobian(x):\n    import jax as J2\n    return J2.jacobian(f)(jnp.asarray(x))  # here\n",
    "jax.grad": "def jacobian(x):\n    g = jax.jit(jax.grad(lambda z: f(z)[0]))  # here\n    return jnp.stack([g(jnp.asarray(x)), jnp.zeros(2)])\n",
    "jax.hessian": "def jacobian(x):\n    return jax.hessian(lambda z: f(z).sum())(jnp.asarray(x))  # here\n",
    "jax.vjp": "def jacobian(x):\n    _, pull = jax.vjp(f, jnp.asarray(x))  # here\n    return jnp.stack([pull(e)[0] for e in jnp.eye(2)])\n",
    "cl.linearize": "def jacobian(x):\n    lin = cl.linearize(lambda x, u, p: f(x), jnp.asarray(x), jnp.zeros(1), None)  # here\n    return lin.A\n",
}


def test_a_hand_derived_jacobian_passes_by_hand_and_the_watch_is_removed_after_the_call():
    import sys

    from course_check.adapters import by_hand
    from course_check.calling import run_case

    ns = notebook(BY_HAND_SETUP + HAND_DERIVED)
    profile = lambda frame, event, arg: None  # noqa: E731 - a profiler the student had set stays set
    sys.setprofile(profile)
    try:
        record = run_case(by_hand(ns["jacobian"]), ["x"], {"x": [0.5, -1.5]})
        assert sys.getprofile() is profile
    finally:
        sys.setprofile(None)
    assert record["status"] == "ok"
    # the template's arity is still read through the wrapper
    assert run_case(by_hand(ns["jacobian"]), ["x", "eps"], {"x": [0.5, -1.5], "eps": 0.1})["status"] == "arguments"


@pytest.mark.parametrize("transform", sorted(AUTODIFF_ANSWERS))
def test_every_way_to_let_jax_differentiate_is_refused_at_the_students_line(transform):
    from course_check.adapters import by_hand
    from course_check.calling import run_case
    from course_check.scoring import _call_problem

    source = BY_HAND_SETUP + AUTODIFF_ANSWERS[transform]
    ns = notebook(source, cl=cl)
    assert run_case(ns["jacobian"], ["x"], {"x": [0.5, -1.5]})["status"] == "ok"  # a working shortcut unguarded
    record = run_case(by_hand(ns["jacobian"]), ["x"], {"x": [0.5, -1.5]})
    assert record["status"] == "by_hand", record
    assert textwrap.dedent(source).splitlines()[record["line"] - 1].endswith("# here"), record
    message = _call_problem("jacobian", {}, record)
    named = "`jax.jacrev`，经由 `cl.linearize`" if transform == "cl.linearize" else f"`{transform}`"
    assert named in message and "亲手推出导数" in message, message


@pytest.mark.parametrize(
    "body",
    [
        "return np.asarray(jnp.linalg.solve(jnp.eye(2) * 2.0, jnp.asarray(x)))",  # JAX's own linear_transpose
        "return np.asarray(jnp.linalg.inv(jnp.diag(jnp.asarray(x))))",
        "return np.asarray(jax.lax.scan(lambda c, a: (c + a, c), 0.0, jnp.asarray(x))[1])",
        "return np.asarray(jax.jit(jax.vmap(jnp.sin))(jnp.asarray(x)))",
    ],
)
def test_plain_jax_computations_are_not_mistaken_for_differentiation(body):
    from course_check.adapters import by_hand
    from course_check.calling import run_case

    ns = notebook(f"def fn(x):\n    {body}\n")
    assert run_case(by_hand(ns["fn"]), ["x"], {"x": [0.5, -1.5]})["status"] == "ok"


# --- s04_2_ex3, mini_diffsim_p1: the reference implementations the notebook says not to call --------------------

OWN_CODE_ANSWERS = {  # the line the feedback must point at ends in "# here"
    "direct": "def norms(As):\n    return cl.step_spectral_norms(jnp.asarray(As))  # here\n",
    "bound to a name": "mine = cl.step_spectral_norms\ndef norms(As):\n    return mine(jnp.asarray(As))  # here\n",
    "one level down": "def helper(As):\n    return cl.step_spectral_norms(As)  # here\ndef norms(As):\n    return helper(jnp.asarray(As))\n",
}


@pytest.mark.parametrize("how", sorted(OWN_CODE_ANSWERS))
def test_a_named_reference_implementation_is_refused_however_it_is_reached(how):
    from course_check.adapters import own_code
    from course_check.calling import run_case
    from course_check.scoring import _call_problem

    source = OWN_CODE_ANSWERS[how]
    ns = notebook(source, cl=cl)
    As = [[[1.0, 0.1], [0.0, 1.0]]] * 3
    assert run_case(ns["norms"], ["As"], {"As": As})["status"] == "ok"  # a working shortcut unguarded
    record = run_case(own_code(ns["norms"], cl.step_spectral_norms, cl.rk4), ["As"], {"As": As})
    assert record["status"] == "own_code", record
    assert textwrap.dedent(source).splitlines()[record["line"] - 1].endswith("# here"), record
    message = _call_problem("norms", {}, record)
    assert "`cl.step_spectral_norms`" in message and "自己的代码" in message, message
    assert ("`helper` 的第" in message) == (how == "one level down"), message


def test_own_code_and_course_libs_own_use_of_a_reference_pass():
    from course_check.adapters import own_code
    from course_check.calling import run_case

    # cl.soft_ball_step builds its step with course_lib's own rk4: not the student's call
    ns = notebook(
        "def fall(x):\n"
        "    step = cl.soft_ball_step(0.01, 'penalty', 'rk4')\n"
        "    return step(jnp.asarray(x), jnp.zeros(1), cl.SoftBallParams())\n",
        cl=cl,
    )
    assert run_case(own_code(ns["fall"], cl.rk4), ["x"], {"x": [1.0, 0.0]})["status"] == "ok"


def test_by_hand_with_references_refuses_both_in_one_watch():
    from course_check.adapters import by_hand
    from course_check.calling import run_case

    ns = notebook(
        "def by_reference(x):\n    return cl.impact_step(jnp.asarray(x), 0.01, 9.81, 0.8)[0]\n"
        "def by_transform(x):\n    return jax.jacfwd(jnp.sin)(jnp.asarray(x))\n"
        "def by_hand_written(x):\n    return np.cos(np.asarray(x))\n",
        cl=cl,
    )
    refs = (cl.impact_step, cl.naive_impact_step)
    case = {"x": [0.5, -1.0]}
    assert run_case(by_hand(ns["by_reference"], *refs), ["x"], case)["status"] == "own_code"
    assert run_case(by_hand(ns["by_transform"], *refs), ["x"], case)["status"] == "by_hand"
    assert run_case(by_hand(ns["by_hand_written"], *refs), ["x"], case)["status"] == "ok"
