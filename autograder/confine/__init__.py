"""What runs before any student byte: the grading kernel's launcher, its Landlock rules and its limits."""
