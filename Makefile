# The two README commands: `make demo` and `make test`. Both create .venv on first use (idempotent, fast after).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test release release-check bench lock clean

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)  ## grade the shipped demo class
	$(BIN)/autograder grade examples/demo_class --out build/demo --resume

test: $(STAMP)  ## the whole test suite
	$(BIN)/python -m pytest

release: $(STAMP)  ## regenerate student_template/, solutions/ and the hidden references from assignments/
	$(BIN)/autograder release

release-check: $(STAMP)  ## verify the committed release matches the source, writing nothing
	$(BIN)/autograder release --check

bench: $(STAMP)  ## class-grading speed, side by side with nbgrader
	$(BIN)/python benchmarks/grade_class.py

lock:  ## refresh requirements.lock from the current .venv (keeps its header; torch stays the local CPU pin)
	{ grep '^#' requirements.lock; $(BIN)/python -m pip freeze --exclude-editable | grep -v '^-e' \
	  | sed 's/^torch==.*/torch==2.13.0/'; } > requirements.lock.new && mv requirements.lock.new requirements.lock

clean:
	rm -rf $(VENV) build
