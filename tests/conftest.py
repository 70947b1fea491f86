"""All library tests run in float64: gradient checks are meaningless in float32 (S04.8.2)."""

import jax

jax.config.update("jax_enable_x64", True)
