"""What an executed notebook cell printed, as the tests read it: what the self-test reads from graded cells."""

from autograder.ops.selftest import printed_parts as output_parts

__all__ = ["output_parts"]
