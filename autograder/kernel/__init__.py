"""What the sandboxed grading kernel imports: the result recorder and the hidden inputs (``inputs/``)."""
