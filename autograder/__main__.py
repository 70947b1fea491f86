from autograder.ops.cli import main

main()
