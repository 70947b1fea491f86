"""Instructor commands: the CLI, the class run, collecting, reports and the self-test."""
