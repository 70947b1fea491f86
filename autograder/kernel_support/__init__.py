"""Code the hidden graded cells of one exercise need inside the grading kernel, one module per exercise.

``autograder/kernel_support/<exercise>.py`` is readable by the sandboxed kernel that grades
``<exercise>`` and by no other; ``<section>_common.py`` by the kernels of all exercises of that
section (:mod:`autograder.confine.landlock`). It must hold nothing that answers a
check of that same exercise (a student's code runs in that kernel and could call it), and must
not import ``autograder.authoring.reference`` or ``autograder.data`` (unreadable there). Typical content:
reference building blocks of EARLIER stages of the project that a later stage's check plugs in.
Reference modules import from here, so each piece of code exists once.
"""
