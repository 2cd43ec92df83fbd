"""Grading a whole class: finding submissions (`intake`), remembering results (`gradebook`), running the engine over
all of them in parallel (`grade_class`)."""
