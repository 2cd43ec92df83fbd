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

demo: $(STAMP)  ## grade the shipped demo class of every assignment: examples/<id>_class -> build/demo/<id>
	set -e; for class in examples/*_class; do id=$$(basename $$class _class); \
	  $(BIN)/autograder grade $$class --assignment $$id --out build/demo/$$id --resume; done

test: $(STAMP)  ## the whole test suite
	$(BIN)/python -m pytest

release: $(STAMP)  ## regenerate student_template/<id>/, solutions/<id>/, dist/<id>/ and the hidden references, every assignment
	$(BIN)/autograder release

release-check: $(STAMP)  ## verify every assignment's committed release matches its source, writing nothing
	$(BIN)/autograder release --check

bench: $(STAMP)  ## class-grading speed, side by side with nbgrader
	$(BIN)/python benchmarks/grade_class.py

lock:  ## refresh requirements.lock from the current .venv (keeps its header; torch stays the local CPU pin)
	{ grep '^#' requirements.lock; $(BIN)/python -m pip freeze --exclude-editable | grep -v '^-e' \
	  | sed 's/^torch==.*/torch==2.13.0/'; } > requirements.lock.new && mv requirements.lock.new requirements.lock

clean:
	rm -rf $(VENV) build
