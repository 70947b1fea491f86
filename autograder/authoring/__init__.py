"""Instructor-side, build time: the graded checks, reference solutions, data regeneration, sources and release scan."""
