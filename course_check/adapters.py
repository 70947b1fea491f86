"""How a check calls a student's function when the notebook's own function is not called directly.

Grading (the hidden cells, in the sandboxed kernel) and the public checks wrap the same way; nothing here
answers a check.

S04.5: ``kink_as_subgradient`` grades the slope of a penalty force at the kink phi = 0 as what it is: any
value of the subdifferential [-k, 0] is right (jax.grad happens to give -k/4; other conventions are as valid).

Mini-DiffSim: a stage's graded functions receive the earlier stages' pieces as arguments, so an earlier
stage's bug is not charged again. ``with_pieces`` passes them after the case's inputs; the stage-3 and
stage-4 wrappers also turn the case's terminal-value *name* into a function (grading knows one more than the
public cases use) and ``long_run_summary`` reduces a long, chaotic training run to what is reproducible.

S04.5: ``complementarity`` grades a complementarity solve by the conditions that define it, as well as by its value.

S04.6 and S04.7: the grader owns what it counts. A counted exercise's graded function calls a notebook function
by its global name (``loss``, ``forward_pass``, ``step``, ...); for the duration of one call the wrapper binds
that name, in the function's own module namespace, to a counting stand-in whose count lives in the wrapper's
closure, and restores the notebook's function afterwards. Nothing the student's code does to the notebook's
own counters (``PASSES``, ``loss.calls``) reaches the count.

``count_loss_calls`` (s04_6_ex2) measures how many loss evaluations a student's ``directional_checks`` makes;
``boolean_as_codes`` turns the boolean answer of ``ad_fd_disagreement`` into non-zero codes, so the
comparison never meets an all-zero (all-agree) result it would misdiagnose.
``count_passes`` (s04_6_ex4) builds the hidden map ``f`` from a case's ``(n_steps, sample_steps)`` with the
notebook's own ``pendulum_map``, hands the student an :class:`Opaque` stand-in of it (evaluable, not
differentiable by JAX, so ``jax.jacfwd(f)`` cannot skip the passes) and returns the student's result with
the forward and reverse passes it made.
``by_hand`` (s04_2_ex1, s04_6_ex1, s04_7_ex1) grades a derivative the exercise asks to be worked out by hand:
while the student's function runs, calling one of JAX's differentiation transforms (``jax.jacfwd(f)``,
``jax.grad``, or ``cl.linearize``, which calls one) raises :class:`AutodiffNotAllowed` at that line, so the
shortcut scores nothing instead of the concept's points. ``own_code`` (s04_2_ex3, mini_diffsim_p1) refuses, the same way,
the ``course_lib`` reference implementations a notebook says not to call (``cl.step_spectral_norms``, ``cl.rk4``, ...).
``planted`` (s04_9_ex1) hands the student's ``audit`` only the step of the environment a case names (a cart-pole
with a planted gradient bug, built by the notebook's ``cl.cart_pole_with_bug``), so the audit has to find the bug.
``watch_checkpoints`` (s04_7_ex4) returns the student's checkpointed value and gradient with how the
schedule ran: the ``segment_backward`` calls made from the true checkpoints in reverse order, whether
``step`` ran at most 3N times, and whether the states held at once stayed within the checkpointing bound.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import sys
import weakref

import numpy as np

NO_CALLS = -1
#: what a disagreement flag is graded as: integer codes, compared by equality (kind "integer"), and never 0, so an
#: answer of all False is not mistaken for an all-zero (cut-graph) result
DISAGREE_CODE, AGREE_CODE = 1, 2


class Counter:
    """A call count only its owner changes: ``counter.counted(fn)`` is ``fn`` counting its calls."""

    def __init__(self):
        self._n = 0

    @property
    def calls(self) -> int:
        return self._n

    def counted(self, fn):
        def counting(*args, **kwargs):
            self._n += 1
            return fn(*args, **kwargs)

        return counting


@contextlib.contextmanager
def rebound(student_fn, **names):
    """Bind ``names`` in ``student_fn``'s module namespace (the notebook's globals) for the block, then put
    back what was there. A callable without a namespace of its own is called as it is."""
    namespace = getattr(student_fn, "__globals__", None)
    if namespace is None:
        yield
        return
    missing = object()
    saved = {name: namespace.get(name, missing) for name in names}
    namespace.update(names)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = value


class _CountedLoss:
    """The stand-in for the notebook's counting ``loss``: same call, a count the grader keeps."""

    def __init__(self, fn, counter: Counter):
        self._call, self._counter = counter.counted(fn), counter

    def __call__(self, u):
        return self._call(u)

    @property
    def calls(self) -> int:
        return self._counter.calls

    @calls.setter
    def calls(self, value):
        """Ignored: the grader's count is not the student's to set (``loss.calls = 0`` still runs)."""

    def reset(self):
        """Does nothing: the grader's count is not the student's to reset."""


def count_loss_calls(student_fn, loss):
    """Wrap the student's ``directional_checks`` for grading: ``(rows, measured loss calls)``.

    ``loss`` is the notebook's loss; while the student's function runs, its global ``loss`` is a stand-in
    that evaluates ``loss`` and counts, fresh for every case. A count of 0 is reported as :data:`NO_CALLS`.
    """

    def graded(u, directions, eps):
        counter = Counter()
        with rebound(student_fn, loss=_CountedLoss(loss, counter)):
            rows = student_fn(u, directions, eps)
        return rows, (counter.calls if counter.calls else NO_CALLS)

    return graded


def flags_as_codes(flags):
    return np.where(np.asarray(flags, dtype=bool), DISAGREE_CODE, AGREE_CODE)


def boolean_as_codes(student_fn):
    """Wrap the student's ``ad_fd_disagreement`` for grading: its boolean (or 0/1) answer becomes codes.

    Anything else (wrong arity, floats, strings) is passed on unchanged, so ``grade`` reports it as usual.
    """

    def graded(points, eps, tol):
        result = student_fn(points, eps, tol)
        if isinstance(result, (tuple, list)) and len(result) == 2:
            try:
                flags = np.asarray(result[1])
            except Exception:  # noqa: BLE001 - leave it to grade() to report
                return result
            if flags.dtype == bool or (np.issubdtype(flags.dtype, np.integer) and np.isin(flags, (0, 1)).all()):
                return result[0], flags_as_codes(flags)
        return result

    return graded


class Opaque:
    """A map the student may evaluate but not differentiate: ``f(x)`` is a NumPy array; JAX cannot trace it.

    Its derivatives come only through the passes the grader counts."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, x):
        try:
            point = np.asarray(x, dtype=np.float64)
        except Exception:  # noqa: BLE001 - a JAX tracer refuses conversion: differentiated directly
            raise TypeError(
                "f may be evaluated, f(x), but not differentiated with jax.jvp / jax.vjp / jax.jacfwd / jax.jacrev "
                "(directly or inside jax.vmap / jax.jit): take its derivatives through forward_pass and reverse_pass, "
                "whose calls are counted"
            ) from None
        return np.asarray(self._fn(point))


#: JAX's differentiation transforms a by-hand answer may not call (``linear_transpose`` is left out: jnp.linalg.solve
#: and jnp.linalg.inv call it on plain values)
AUTODIFF = ("grad", "value_and_grad", "jacfwd", "jacrev", "jacobian", "hessian", "jvp", "vjp", "linearize")


class Refused(TypeError):
    """A call an adapter does not allow while the student's function is graded; ``line`` is the student's line that
    made it (a ``course_lib`` helper in between is skipped)."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


class AutodiffNotAllowed(Refused):
    """A function graded :func:`by_hand` called one of JAX's differentiation transforms."""


class ReferenceNotAllowed(Refused):
    """A function graded :func:`own_code` called a reference implementation the exercise asks the student to write."""


def _watched(student_fn, refuse):
    """``student_fn`` called with ``refuse(frame)`` as this thread's profile function for the duration of one call
    (the previous one is put back): ``refuse`` sees every Python call and raises to refuse one."""

    def watch(frame, event, arg):
        if event == "call":
            refuse(frame)

    @functools.wraps(student_fn)
    def graded(*args):
        previous = sys.getprofile()
        sys.setprofile(watch)
        try:
            return student_fn(*args)
        finally:
            sys.setprofile(previous)

    return graded


def _in_package(frame, package: str) -> bool:
    """Whether ``frame`` runs code of the loaded package ``package`` (by its folder)."""
    module = sys.modules.get(package)
    folder = os.path.dirname(getattr(module, "__file__", None) or "") + os.sep
    return folder != os.sep and frame.f_code.co_filename.startswith(folder)


def by_hand(student_fn, *references):
    """Wrap a student function whose derivative the exercise asks to be worked out by hand (a closed form, an own
    recursion): while it runs, a call of a transform of :data:`AUTODIFF` made by the student's code or by
    ``course_lib`` (``cl.linearize``) raises :class:`AutodiffNotAllowed`. JAX's calls of its own transforms
    (``jax.hessian`` calling ``jax.jacfwd``, a linear solve) are not the student's and pass. The transforms are
    found by their code, under any name (``from jax import jacfwd``, ``import jax as J``). ``references`` are
    refused as :func:`own_code` refuses them (one watch: two nested watches would replace each other).

    JAX is taken from the modules the notebook has loaded (course_check imports numpy only: it ships to students and
    runs in the trusted grader too); a notebook that has not loaded JAX has no transform to call."""
    refuse_reference = _reference_refusal(student_fn, references)
    jax = sys.modules.get("jax")
    if jax is None:
        return _watched(student_fn, refuse_reference)
    entries = {inspect.unwrap(getattr(jax, name)).__code__: name for name in AUTODIFF}
    boundary = os.path.join(
        os.path.dirname(jax.__file__), "_src", "traceback_util.py"
    )  # JAX's api_boundary wrapper of every API function
    name = getattr(student_fn, "__name__", "this function")

    def refuse(frame):
        refuse_reference(frame)
        if frame.f_code not in entries:
            return
        caller = frame.f_back
        while caller is not None and caller.f_code.co_filename == boundary:  # jax's API wrapper of the transform
            caller = caller.f_back
        if caller is None or _in_package(caller, "jax"):
            return
        helper = ""
        while caller.f_back is not None and _in_package(caller, "course_lib"):
            helper = helper or f" (through course_lib's {caller.f_code.co_name})"
            caller = caller.f_back
        raise AutodiffNotAllowed(
            f"{name} called jax.{entries[frame.f_code]}{helper} from {caller.f_code.co_name}: this exercise asks "
            "for the derivative worked out by hand, so JAX's differentiation transforms are not available while it "
            "is graded",
            caller.f_lineno,
        )

    return _watched(student_fn, refuse)


def own_code(student_fn, *references):
    """Wrap a student function that must not hand the work to the course's reference implementations (the
    ``course_lib`` functions the notebook names as what its self-check compares with): while it runs, a call of
    one of ``references`` made from outside ``course_lib`` and JAX (the student's code, at any depth, under any
    name, ``explicit_euler = cl.explicit_euler`` included) raises :class:`ReferenceNotAllowed`. ``course_lib``'s
    own use of them inside another function is not the student's call and passes."""
    return _watched(student_fn, _reference_refusal(student_fn, references))


def _reference_refusal(student_fn, references):
    """The refusal of :func:`own_code`: ``refuse(frame)`` raises :class:`ReferenceNotAllowed` on a student's call of
    one of ``references``."""
    entries = {inspect.unwrap(ref).__code__: f"cl.{ref.__name__}" for ref in references}
    name = getattr(student_fn, "__name__", "this function")

    def refuse(frame):
        if frame.f_code not in entries:
            return
        caller = frame.f_back
        if caller is None or _in_package(caller, "course_lib") or _in_package(caller, "jax"):
            return
        raise ReferenceNotAllowed(
            f"{name} called {entries[frame.f_code]} from {caller.f_code.co_name}: the exercise asks for this step "
            "in your own code; the course_lib function is the reference the self-check compares with, and is not "
            "available while it is graded",
            caller.f_lineno,
        )

    return refuse


def planted(student_fn, make_env):
    """Wrap the student's ``audit(step_fn, x, u, eps, tol)`` for grading as ``graded(bug, x, u, h, eps, tol)``:
    ``make_env(bug, h)`` builds the case's environment and the student receives only its ``step_fn(x, u)``."""

    def graded(bug, x, u, h, eps, tol):
        env = make_env(bug, h)

        def step_fn(x, u):
            return env(x, u)

        return student_fn(step_fn, x, u, eps, tol)

    return graded


def count_passes(student_fn, make_map, forward_pass, reverse_pass):
    """Wrap a student function of ``(f, x, *rest)`` for grading: ``(its result, [forward, reverse] passes)``.

    ``make_map(n_steps, sample_steps)`` is the notebook's map factory and ``forward_pass`` / ``reverse_pass``
    its passes. The student's function receives the map as an :class:`Opaque` ``f``; its global names
    ``forward_pass`` and ``reverse_pass`` are counting stand-ins that differentiate the real map, so each hidden
    case is counted on its own and only the passes made count.
    """

    def graded(x, n_steps, sample_steps, *rest):
        real = make_map(n_steps, sample_steps)
        f = Opaque(real)
        forward, reverse = Counter(), Counter()

        def forward_on_real(f_, x, v):  # the notebook's parameter names, so keyword calls work too
            return forward_pass(real if f_ is f else f_, x, v)

        def reverse_on_real(f_, x, w):
            return reverse_pass(real if f_ is f else f_, x, w)

        with rebound(
            student_fn, forward_pass=forward.counted(forward_on_real), reverse_pass=reverse.counted(reverse_on_real)
        ):
            result = student_fn(f, x, *rest)
        return result, np.array([forward.calls, reverse.calls])

    return graded


class _StateWatch:
    """States the counted ``step`` returned that are still alive: their number now and at most."""

    def __init__(self):
        self.alive = self.peak = 0

    def track(self, state):
        try:
            weakref.finalize(state, self._gone)
        except TypeError:  # not weak-referenceable (a tuple, a float): not a state held by reference
            return state
        self.alive += 1
        self.peak = max(self.peak, self.alive)
        return state

    def _gone(self):
        self.alive -= 1


def _same_state(a, b) -> bool:
    try:
        return bool(
            np.allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=1e-9, atol=1e-12)
        )
    except (TypeError, ValueError):
        return False


def watch_checkpoints(student_fn, step):
    """Wrap the student's ``checkpointed_value_and_grad(x0, us, segment_length)`` for grading:
    ``(L, dL/dU, segments, steps_ok, held_ok)``.

    While it runs, its global ``step`` counts calls and watches the states it returns, and its global
    ``segment_backward`` records each call's checkpoint and controls before calling the student's own.

    * ``segments``: ceil(N/s) when ``segment_backward`` was called exactly once per segment, last segment first,
      each from the true state at the segment's start (the notebook's ``step`` from ``x0``) with that segment's
      controls; otherwise how many calls matched before the first that did not (0 with extra calls).
    * ``steps_ok``: 1 when ``step`` ran at most 3N times (a forward pass and one recomputation, with slack).
    * ``held_ok``: 1 when the states ``step`` returned that were alive at once never exceeded
      ceil(N/s) + s + 2 (the checkpoints, one recomputed segment, and the state in hand).
    """

    def graded(x0, us, segment_length):
        namespace = getattr(student_fn, "__globals__", {})
        own_segment = namespace.get("segment_backward")
        us_arr = np.asarray(us, dtype=np.float64)
        n, s = us_arr.shape[0], int(segment_length)
        starts = list(range(0, n, s))
        truth, x = {}, x0
        for k in range(n):  # the true checkpoints, by the notebook's own step
            if k % s == 0:
                truth[k] = np.asarray(x)
            x = step(x, us_arr[k])
        steps, watch, calls = Counter(), _StateWatch(), []

        def segment_backward(x_start, us_seg, lam_end):
            calls.append((np.array(x_start, dtype=np.float64, copy=True), np.array(us_seg, dtype=np.float64)))
            return own_segment(x_start, us_seg, lam_end)

        counted_step = steps.counted(step)

        def watched_step(x, u):
            return watch.track(counted_step(x, u))

        with rebound(student_fn, step=watched_step, segment_backward=segment_backward):
            result = student_fn(x0, us, segment_length)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError("checkpointed_value_and_grad must return two values: (L, dL/dU)")
        expected = [(truth[k], us_arr[k : k + s]) for k in reversed(starts)]
        matched = 0
        for (x_got, u_got), (x_true, u_true) in zip(calls, expected):
            if u_got.shape != u_true.shape or not _same_state(x_got, x_true) or not _same_state(u_got, u_true):
                break
            matched += 1
        if len(calls) > len(expected):
            matched = 0
        held_bound = math.ceil(n / s) + s + 2
        return (*result, np.int64(matched), np.int64(steps.calls <= 3 * n), np.int64(watch.peak <= held_bound))

    return graded


#: the complementarity a solve must meet, relative to max(1, max|w0|): z >= 0, w = W z + w0 >= 0, |z . w| small
COMPLEMENTARITY_TOL = 1e-12


def complementarity(student_fn):
    """Wrap the student's ``solve_lcp(W, w0) -> z`` for grading: ``(z, 1 when z satisfies the complementarity
    conditions 0 <= z _|_ W z + w0 >= 0 within COMPLEMENTARITY_TOL, else 0)``: the condition the notebook's own
    self-check asserts, so a solve it rejects (an iteration stopped early) cannot pass."""

    def graded(W, w0):
        z = student_fn(W, w0)
        try:
            z_arr = np.asarray(z, dtype=np.float64)
            w = np.asarray(W, dtype=np.float64) @ z_arr + np.asarray(w0, dtype=np.float64)
        except (TypeError, ValueError):
            return z, np.int64(0)  # the comparison of z reports what is wrong with it
        tol = COMPLEMENTARITY_TOL * max(1.0, float(np.max(np.abs(w0))))
        ok = z_arr.shape == w.shape and np.min(z_arr) >= -tol and np.min(w) >= -tol and abs(float(z_arr @ w)) <= tol
        return z, np.int64(ok)

    return graded


def kink_as_subgradient(student_fn):
    """Wrap the student's ``penalty_contact(phi, k) -> (lam, slope)`` for grading: ``(lam, slope where
    phi != 0 (0 at phi = 0), how far the slopes at phi = 0 lie outside [-k, 0], divided by k)``.

    A result that is not a pair with a slope shaped like ``phi`` raises a TypeError that says so (the
    feedback quotes it; the outputs of this wrapper are not the student's to count).
    """
    shape_error = "penalty_contact must return two arrays shaped like phi: (lam, dlam_dphi)"

    def graded(phi, k):
        result = student_fn(phi, k)
        try:
            lam, slope = result
            slope, phi_arr = np.asarray(slope, dtype=np.float64), np.asarray(phi, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(shape_error) from None
        if slope.shape != phi_arr.shape:
            raise TypeError(shape_error)
        kink = phi_arr == 0
        at_kink = slope[kink]
        outside = np.maximum(at_kink, 0.0) + np.maximum(-k - at_kink, 0.0)
        return lam, np.where(kink, 0.0, slope), np.max(outside, initial=0.0) / k

    return graded


# --- Mini-DiffSim ----------------------------------------------------------------------------------

#: iterations of the long stage-3 run compared value by value (reproducible across machines: see
#: autograder.authoring.reference.mini_diffsim); a gradient spike is a raw norm SPIKE_FACTOR x the clip
LONG_PREFIX = 4
SPIKE_FACTOR = 10.0


def with_pieces(student_fn, *pieces):
    """The student's function called with the case's inputs, then ``pieces`` (an integrator, a plateau finder)."""
    return lambda *inputs: student_fn(*inputs, *pieces)


def stage3_window(student_fn, step, values):
    """``window_loss(theta, x_starts, horizon, step, terminal_value) -> (L, (terms, states))`` as a check calls
    it: ``(theta, x_starts, horizon, value name) -> (L, terms, states)``; ``values``: name -> terminal value."""

    def window(theta, x_starts, horizon, value):
        loss, parts = student_fn(theta, x_starts, int(horizon), step, values[str(value)])
        return (loss, *parts)  # parts = (terms, states)

    return window


def stage3_train(student_fn, step, values):
    """``train(horizon, n_iterations, seed, step, terminal_value)`` as a check calls it (the value by name)."""
    return lambda horizon, n_iterations, seed, value: student_fn(
        int(horizon), int(n_iterations), int(seed), step, values[str(value)]
    )


def long_run_summary(result, clip):
    """What check ``mini_diffsim_p3.train_long`` compares of ``train``'s result
    ``(grad_norms, clipped_norms, losses, eval_losses)``.

    Returns the raw gradient norms and window losses of the first LONG_PREFIX iterations, shape
    (2, LONG_PREFIX), then four 0/1 properties: no NaN/Inf anywhere; a spike > SPIKE_FACTOR * clip among the
    raw norms; clipped norms = min(raw norms, clip); evaluation loss lower after training. Each property is
    judged on the finite entries, so a run that ends in NaN fails the first (and the last) only.
    """
    try:
        norms, clipped, losses, evals = (np.asarray(a, dtype=np.float64) for a in result)
        prefix = np.stack([norms[:LONG_PREFIX], losses[:LONG_PREFIX]])
        both = np.isfinite(norms) & np.isfinite(clipped)
        finite_norms = norms[np.isfinite(norms)]
        flags = (
            all(np.all(np.isfinite(a)) for a in (norms, clipped, losses, evals)),
            finite_norms.size > 0 and np.max(finite_norms) > SPIKE_FACTOR * clip,
            np.any(both) and np.allclose(clipped[both], np.minimum(norms[both], clip), rtol=1e-9, atol=0),
            evals.shape == (2,) and np.all(np.isfinite(evals)) and evals[1] < evals[0],
        )
    except (TypeError, ValueError, IndexError):
        raise ValueError(
            "train must return four arrays (grad_norms, clipped_norms, losses, eval_losses), "
            "the first three of length n_iterations"
        ) from None
    return (prefix, *(np.int64(f) for f in flags))


def stage4_panel(student_fn, loss_for_value, force):
    """``panel_data(horizon, n_iterations, seed, loss_fn, force_fn)`` as a check calls it: the case names a
    terminal value, ``loss_for_value(name)`` gives the window loss ``loss_fn(theta, x_starts, horizon)``."""
    return lambda horizon, n_iterations, seed, value: student_fn(
        int(horizon), int(n_iterations), int(seed), loss_for_value(str(value)), force
    )
