"""Short-horizon (SHAC-style) policy optimisation on the stiff-wall toy task."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transform_checks import check_transforms
from course_lib.shac.critic import critic_value, fit_critic, init_mlp, lambda_returns, mlp_policy, quadratic_features
from course_lib.shac.tasks import WallParams, wall_dynamics, wall_task
from course_lib.shac.train import ShacResult, shac_train
from course_lib.shac.window import episode_cost, short_horizon_loss

TASK = wall_task()  # episode of 64 steps, h = 0.02, wall stiffness 2500 N/m
POLICY0 = init_mlp(jax.random.PRNGKey(0), (2, 1))  # linear policy, starts at u = 0
N_ITER = 100


def test_training_on_the_stiff_wall():
    """One test for all properties of the two training runs (h = 4 and h = 32), so that each
    compiles once per test process even under ``pytest -n``."""
    runs = {
        h: shac_train(TASK, POLICY0, jax.random.PRNGKey(1), horizon=h, n_iterations=N_ITER, learning_rate=0.05)
        for h in (4, 32)
    }
    for h, result in runs.items():
        rec = result.records
        # the optimiser lowers the cost of a full episode
        costs = np.asarray(result.episode_cost)
        assert costs[0] == pytest.approx(float(episode_cost(POLICY0, TASK)))
        assert np.mean(costs[-10:]) < 0.6 * costs[0], f"h={h}: episode cost did not drop"
        # the wall was hit, and contact spikes left no NaN anywhere
        assert int(rec.contact_count.sum()) > 0 and float(rec.max_penetration.max()) > 0
        for leaf in jax.tree_util.tree_leaves(
            (result.policy_params, result.critic_params, rec, result.episode_cost, result.critic_loss)
        ):
            assert np.all(np.isfinite(np.asarray(leaf))), f"h={h}: non-finite record"
        # Adam moves each parameter by at most lr (1 - b1) / sqrt(1 - b2) ~ 3.2 lr (Kingma & Ba, sec. 2.1)
        assert np.all(np.asarray(rec.step_size) <= 0.05 * 3.17 * np.sqrt(3))
        np.testing.assert_allclose(rec.loss, rec.loss_terms["stage"] + rec.loss_terms["terminal"], rtol=1e-12)
        assert rec.grad_norm.shape == (N_ITER,)

    assert isinstance(runs[32], ShacResult) and runs[32].critic_params.shape == (6,)
    rec = runs[32].records
    # norms are recorded before clipping (threshold 1.0): contact spikes far above the typical norm
    assert float(rec.grad_norm.max()) > 10 * float(jnp.median(rec.grad_norm))
    assert float(rec.grad_norm.max()) > 1.0
    np.testing.assert_array_equal(runs[32].window[:4], [0, 1, 0, 1])  # 64 // 32 windows per episode
    # longer windows (more stiff steps in each Jacobian product) give larger gradient norms
    short, long = runs[4].records.grad_norm, runs[32].records.grad_norm
    assert float(jnp.median(long)) > 2 * float(jnp.median(short))
    assert float(jnp.max(long)) > 2 * float(jnp.max(short))


def test_window_start_and_critic_get_no_gradient():
    starts = jnp.array([[0.1, 1.0], [0.3, -0.5]])
    psi = jnp.arange(6.0) * 0.1
    policy = init_mlp(jax.random.PRNGKey(2), (2, 1), zero_last=False)

    def loss(p, c, x):
        return short_horizon_loss(p, c, x, TASK, horizon=5)[0]

    g_policy, g_critic, g_start = jax.grad(loss, argnums=(0, 1, 2))(policy, psi, starts)
    assert float(jnp.max(jnp.abs(g_start))) == 0.0 and float(jnp.max(jnp.abs(g_critic))) == 0.0
    assert float(jnp.max(jnp.abs(g_policy[0][0]))) > 0.0


def test_one_step_loss_by_hand():
    x = jnp.array([0.2, 1.0])
    policy = [(jnp.array([[-1.0, -0.5]]), jnp.array([0.3]))]
    psi = jnp.array([0.5, 0.1, -0.2, 1.0, 0.3, 2.0])
    loss, roll = short_horizon_loss(policy, psi, x[None], TASK, horizon=1, gamma=0.9)
    u = policy[0][0] @ x + policy[0][1]
    x1 = TASK.step(x, u, TASK.params)
    expected = TASK.stage_cost(x, u, TASK.params) + 0.9 * critic_value(psi, x1)
    np.testing.assert_allclose(loss, expected, rtol=1e-12)
    np.testing.assert_allclose(roll.states[0], jnp.stack([x, x1]))


def test_lambda_returns_and_critic_fit():
    costs = jnp.array([1.0, 2.0, 3.0])
    v_next = jnp.array([10.0, 20.0, 30.0])
    g1 = lambda_returns(costs, v_next, v_next[-1], gamma=0.5, td_lambda=1.0)
    np.testing.assert_allclose(g1, [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 30, 2 + 0.5 * 3 + 0.25 * 30, 3 + 0.5 * 30])
    g0 = lambda_returns(costs, v_next, v_next[-1], gamma=0.5, td_lambda=0.0)
    np.testing.assert_allclose(g0, costs + 0.5 * v_next)
    xs = jax.random.normal(jax.random.PRNGKey(4), (50, 2))
    psi_true = jnp.array([0.5, -1.0, 2.0, 3.0, 0.5, 1.0])
    psi, mse = fit_critic(xs, jax.vmap(lambda x: critic_value(psi_true, x))(xs), ridge=0.0)
    np.testing.assert_allclose(psi, psi_true, rtol=1e-9)
    assert float(mse) < 1e-20
    assert quadratic_features(jnp.array([2.0, 3.0])).tolist() == [1.0, 2.0, 3.0, 4.0, 6.0, 9.0]


def _tiny_train(z):
    task = wall_task(WallParams(target=z[0]), episode_length=4)
    return shac_train(task, POLICY0, jax.random.PRNGKey(0), horizon=2, n_iterations=3, n_envs=2)


X_Z = jnp.array([0.6, 0.3, 0.9, 0.2])
MLP = init_mlp(jax.random.PRNGKey(1), (2, 3, 1), zero_last=False)
CASES = {
    # only the policy parameters depend on z: starts and critic are stop_gradient-ed by design
    "short_horizon_loss": (
        lambda z: short_horizon_loss(
            [(z[None, :2], z[2:3] * z[3])], jnp.ones(6) * 0.1, jnp.array([[0.6, 0.3], [0.9, 0.2]]), TASK, horizon=6
        ),
        True,
    ),
    "episode_cost": (lambda z: episode_cost([(z[None, :2], z[2:3])], TASK), True),
    "mlp_policy": (lambda z: mlp_policy(MLP, z[:2] * z[3]), True),
    "quadratic_features": (lambda z: quadratic_features(z), True),
    "critic_value": (lambda z: critic_value(jnp.arange(6.0), z[:2]), True),
    "fit_critic": (
        lambda z: fit_critic(
            jnp.outer(jnp.arange(8.0), z[:2]) + jnp.sin(jnp.arange(16.0)).reshape(8, 2),
            jnp.arange(8.0) * z[2],
            ridge=1e-3,
        ),
        True,
    ),
    "lambda_returns": (lambda z: lambda_returns(z[:3], z[1:], z[3], gamma=0.9, td_lambda=0.7), True),
    "wall_dynamics": (lambda z: wall_dynamics(jnp.array([1.0, 0.0]) + z[:2], z[2:3], WallParams()), True),
    # a training run is differentiable but its gradient (through Adam and the critic fit) means little
    "shac_train": (lambda z: _tiny_train(z).records.grad_norm, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow  # compiles every public function three times
def test_jit_vmap_grad(name):
    fn, differentiable = CASES[name]
    # shac_train's eager run is itself one compiled lax.scan: spare a compilation
    check_transforms(
        fn, X_Z, differentiable=differentiable, scales=(1.0, 0.9), vmap_rtol=1e-9, eager=name != "shac_train"
    )


@pytest.mark.parametrize("h", [0, -3, 2.5])
def test_bad_horizon(h):
    with pytest.raises(ValueError, match="shac_train: horizon h must be a Python int >= 1"):
        shac_train(TASK, POLICY0, jax.random.PRNGKey(0), horizon=h, n_iterations=2)
    with pytest.raises(ValueError, match="short_horizon_loss: horizon h must be a Python int >= 1"):
        short_horizon_loss(POLICY0, jnp.zeros(6), TASK.x0[None], TASK, horizon=h)


def test_other_bad_settings_name_the_problem():
    key = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match=r"gamma must be in \(0, 1\]"):
        shac_train(TASK, POLICY0, key, horizon=4, n_iterations=2, gamma=1.5)
    with pytest.raises(ValueError, match=r"td_lambda must be in \[0, 1\]"):
        shac_train(TASK, POLICY0, key, horizon=4, n_iterations=2, td_lambda=-0.1)
    with pytest.raises(ValueError, match="max_grad_norm must be positive"):
        shac_train(TASK, POLICY0, key, horizon=4, n_iterations=2, max_grad_norm=0.0)
    with pytest.raises(ValueError, match="n_envs must be a Python int >= 1"):
        shac_train(TASK, POLICY0, key, horizon=4, n_iterations=2, n_envs=0)
    with pytest.raises(ValueError, match=r"policy must map a state .* to an input of shape \(1,\)"):
        shac_train(TASK, init_mlp(key, (2, 3)), key, horizon=4, n_iterations=2)
    with pytest.raises(ValueError, match=r"x_starts must have shape \(B, 2\)"):
        short_horizon_loss(POLICY0, jnp.zeros(6), TASK.x0, TASK, horizon=2)
    with pytest.raises(ValueError, match="init_mlp: sizes must list at least two"):
        init_mlp(key, (2,))
    with pytest.raises(ValueError, match="wall_dynamics: state x must have shape"):
        wall_dynamics(jnp.zeros(3), jnp.zeros(1), WallParams())
