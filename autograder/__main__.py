from autograder.cli import app

app(prog_name="autograder")
